"""A dead instance is noticed at once, in use or not: its cost stops counting, its desktop is
replaced (an idle one straight away), its revert relaunches it. The scenario of issue 28 on
moto, printed as it goes (``pytest -s`` shows it): launch 4, kill one behind the fleet's
back, revert, exceed the cap, reap."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aws_helpers import DesktopServer, LoopbackResolver
from typer.testing import CliRunner

from aws import CostCapReached, FleetConfig
from core.protocols import EnvironmentLost
from environments.osworld.aws import AWSDesktop, AWSProvider
from runner.cli.aws import app

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def _until(predicate: Any, timeout: float = 20.0) -> float:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, "timed out"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


def _provider(cfg: FleetConfig, run_id: str, server: DesktopServer, resolver: LoopbackResolver, size: int) -> AWSProvider:
    return AWSProvider(size, config=cfg, run_id=run_id, token=server.token, resolve=resolver, state_check_interval=60.0)


async def test_launch_4_kill_one_revert_exceed_the_cap_reap(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    # $1 an hour, 60 minutes to live: each live instance commits $1; the cap holds four and a bit.
    cfg = fleet_config.model_copy(update={"prices": {"t3.medium": 1.0}, "ttl_minutes": 60, "max_cost": 4.5})
    say = print
    async with _provider(cfg, run_id, desktop_server, resolver, 4) as pool:
        fleet = pool.fleet
        committed = lambda: fleet.costs.committed(time.time())  # noqa: E731
        ids = sorted(e.instance_id for e in pool.environments)  # type: ignore[misc]
        assert live(ec2, run_id) == ids and len(ids) == 4
        say(f"launched 4: {', '.join(ids)}; committed ${committed():.2f} of ${cfg.max_cost:.2f}")
        assert committed() == pytest.approx(4.0, abs=0.01)

        victim = pool.environments[1]
        dead = victim.instance_id
        ec2.terminate_instances(InstanceIds=[dead])  # behind the fleet's back, while the desktop is idle
        noticed = await _until(lambda: fleet.stats.died == 1)
        say(f"killed {dead} behind the fleet's back: noticed after {noticed:.2f} s "
            f"(watch every {cfg.watch_interval:g} s), its desktop {victim.machine.name} marked lost: "
            f"{victim.machine.lost}")
        assert victim.machine.lost == f"instance {dead} of {victim.name} is terminated" or "shutting-down" in str(
            victim.machine.lost)
        assert dead not in [r.id for r in fleet.live]
        # Its cost stopped: what it ran (one billed minute), no longer an hour reserved.
        spent_dead = 1.0 * 60 / 3600
        await _until(lambda: pool.replaced_idle == 1)
        fresh = next(e for e in pool.environments if e.name == "aws-5")
        say(f"its idle desktop replaced by {fresh.name} on {fresh.instance_id}; committed ${committed():.2f} "
            f"(the dead one counts ${spent_dead:.3f}, what it ran)")
        assert committed() == pytest.approx(4.0 + spent_dead, abs=0.02)
        assert sorted(live(ec2, run_id)) == sorted(e.instance_id for e in pool.environments)  # type: ignore[type-var]

        env = await pool.acquire()
        assert isinstance(env, AWSDesktop) and env.machine.lost is None
        await env.act("pass")  # used: a revert is due
        old = env.instance_id
        await env.revert()
        say(f"reverted {env.name}: {old} terminated, {env.instance_id} launched; committed ${committed():.2f}")
        assert env.instance_id != old and fleet.stats.reverts == 1

        with pytest.raises(CostCapReached) as refused:
            await fleet.launch("aws-extra")
        say(f"a fifth desktop refused: {refused.value}")
        assert "over its $4.50 cap" in str(refused.value) and len(live(ec2, run_id)) == 4

        before, replaced = fleet.stats.died, pool.replaced_idle
        reaped = set(live(ec2, run_id))
        out = CliRunner().invoke(app, ["reap", "--run-id", run_id])
        assert out.exit_code == 0, out.output
        say("agent-s3 aws reap --run-id: " + out.output.strip().splitlines()[-1])
        await _until(lambda: fleet.stats.died == before + 4 and pool.replaced_idle == replaced + 3)
        say(f"the fleet noticed the 4 reaped instances (died {fleet.stats.died}), replaced the 3 idle desktops "
            f"(replaced {pool.replaced_idle}); the one in use is lost; committed ${committed():.2f}")
        assert not reaped & {r.id for r in fleet.live} and len(fleet.live) == 3
        with pytest.raises(EnvironmentLost, match=r"is (terminated|shutting-down)"):
            await env.screenshot()
        pool.release(env)
    assert live(ec2, run_id) == [] and fleet.live == []
    assert fleet.costs.committed(time.time()) == pytest.approx(fleet.costs.spent(time.time()), abs=1e-6)
    say(f"closed: nothing live, nothing reserved (${fleet.costs.spent(time.time()):.3f} spent)")
    say(f"stats: {fleet.stats}")


async def test_a_desktop_in_use_whose_instance_dies_fails_at_once_and_reverts_to_a_new_one(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    async with _provider(fleet_config, run_id, desktop_server, resolver, 1) as pool:
        env = await pool.acquire()
        dead = env.instance_id
        ec2.stop_instances(InstanceIds=[dead])  # stopped, not terminated: still a dead desktop
        await _until(lambda: env.machine.lost is not None)
        assert pool.replaced_idle == 0  # in use: not replaced under its user
        calls = []
        real_state = pool.fleet.state
        pool.fleet.state = lambda i: calls.append(i) or real_state(i)  # type: ignore[method-assign]
        with pytest.raises(EnvironmentLost, match=f"instance {dead} of aws-1 is stopp"):
            await env.screenshot()
        assert calls == []  # the watch already said so: no EC2 call on the way
        # The fleet terminated the stopped instance (it still paid for its volume).
        await _until(lambda: ec2.describe_instances(InstanceIds=[dead])["Reservations"][0]["Instances"][0]
                     ["State"]["Name"] in ("shutting-down", "terminated"))
        assert not env.machine.used
        await env.revert()  # never used, but dead: relaunched, not skipped
        assert env.instance_id != dead and env.machine.lost is None and pool.fleet.stats.reverts_skipped == 0
        assert (await env.screenshot()).startswith(b"\x89PNG")
        assert live(ec2, run_id) == [env.instance_id]
        pool.release(env)
    assert live(ec2, run_id) == []
