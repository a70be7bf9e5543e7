"""The AWS provider: OSWorld desktops on moto-launched instances whose server is our own on loopback."""

from __future__ import annotations

from typing import Any

import pytest
from aws_helpers import DesktopServer, LoopbackResolver

from aws import FleetConfig
from aws.tags import ROLLOUT, TASK
from core.protocols import EnvironmentLost
from environments.conformance import DESKTOP_KIT, check_click_lands, check_screenshot_png
from environments.osworld import OSWorldDesktop
from environments.osworld.aws import AWSDesktop, AWSProvider

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def _provider(cfg: FleetConfig, run_id: str, server: DesktopServer, resolver: LoopbackResolver, size: int) -> AWSProvider:
    return AWSProvider(size, config=cfg, run_id=run_id, token=server.token, resolve=resolver, state_check_interval=0.0)


def _state(ec2: Any, instance_id: str | None) -> str:
    item = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(item["State"]["Name"])


def _tag(ec2: Any, instance_id: str | None, key: str) -> str:
    item = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in item["Tags"]}[key]


async def test_desktops_screen_act_and_revert_through_the_current_instance(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    async with _provider(fleet_config, run_id, desktop_server, resolver, 2) as pool:
        envs = pool.environments
        assert len(envs) == 2 and all(isinstance(e, OSWorldDesktop) for e in envs)
        assert sorted(e.instance_id for e in envs) == live(ec2, run_id)  # type: ignore[type-var]
        assert sorted(_tag(ec2, e.instance_id, ROLLOUT) for e in envs) == ["0", "1"]

        env = await pool.acquire()
        assert isinstance(env, AWSDesktop)
        await check_screenshot_png(env, DESKTOP_KIT)
        assert await env.screen_size() == (1280, 720)
        first = env.instance_id
        await env.revert()  # only read so far: nothing to undo, no relaunch
        assert env.instance_id == first and pool.fleet.stats.reverts_skipped == 1

        await check_click_lands(env, DESKTOP_KIT)
        assert env.machine.used
        client = env.client
        await env.revert()
        assert env.instance_id != first and _state(ec2, first) == "terminated"
        assert env.client is client and not env.machine.used  # the same client reaches the new instance
        assert (await env.screenshot()).startswith(b"\x89PNG")

        box = env.sandbox()
        assert box is not None
        result = await box.run("bash", "echo from-the-vm")
        assert result.ok and "from-the-vm" in result.stdout and env.machine.used

        await env.relabel(task="task-7", rollout=3)
        assert _tag(ec2, env.instance_id, TASK) == "task-7"
        pool.release(env)
    assert live(ec2, run_id) == []


async def test_a_terminated_instance_is_lost_and_replaced_on_acquire(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    async with _provider(fleet_config, run_id, desktop_server, resolver, 1) as pool:
        env = await pool.acquire()
        dead = env.instance_id
        ec2.terminate_instances(InstanceIds=[dead])  # the instance dies under the desktop
        with pytest.raises(EnvironmentLost, match=f"instance {dead} of aws-1 is (shutting-down|terminated)"):
            await env.screenshot()
        with pytest.raises(EnvironmentLost):
            await env.act("pass")
        pool.release(env)
        fresh = await pool.acquire()
        assert fresh is not env and fresh.name == "aws-2" and fresh.instance_id != dead
        assert [e.name for e in pool.environments] == ["aws-2"]
        assert (await fresh.screenshot()).startswith(b"\x89PNG")
        assert live(ec2, run_id) == [fresh.instance_id]
    assert live(ec2, run_id) == []


async def test_a_revert_that_never_gets_healthy_is_lost(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"healthy_timeout": 0.3, "launch_attempts": 2})
    async with _provider(cfg, run_id, desktop_server, resolver, 1) as pool:
        env = await pool.acquire()
        await env.act("pass")
        resolver.kill_next = 2
        with pytest.raises(EnvironmentLost, match="no instance of aws-1 became healthy in 2 attempts"):
            await env.revert()
        with pytest.raises(EnvironmentLost):
            await env.screenshot()
        assert pool.fleet.stats.unhealthy == 2 and live(ec2, run_id) == []


async def test_a_failed_start_terminates_the_desktops_that_did_start(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"max_instances": 2})
    with pytest.raises(Exception, match="max_instances"):
        async with _provider(cfg, run_id, desktop_server, resolver, 3):
            pass
    assert live(ec2, run_id) == []
