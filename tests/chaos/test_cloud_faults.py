"""Cloud faults against a moto EC2 server over loopback HTTP (the AWS tests' fixtures): a
launching host SIGKILLed after its instances are up leaves them for `aws reap`, which
leaves none; an instance that never becomes healthy is terminated, replaced and counted,
and the run goes on launching."""

from __future__ import annotations

import random
from typing import Any

import pytest
from aws_helpers import DesktopServer, LoopbackResolver, Network
from chaos_helpers import Figures, load_conftest, scale
from test_lifecycle import _ready, _spawn
from typer.testing import CliRunner

from aws import Fleet, FleetConfig, HttpProbe
from runner.cli.aws import app

pytestmark = [pytest.mark.chaos, pytest.mark.desktop, pytest.mark.integration]

_aws = load_conftest("aws", "aws_fixtures")
moto, fake_aws, ec2, network, fleet_config = _aws.moto, _aws.fake_aws, _aws.ec2, _aws.network, _aws.fleet_config
desktop_server, resolver, run_id, live = _aws.desktop_server, _aws.resolver, _aws.run_id, _aws.live


def test_a_crashed_host_leaves_nothing_after_reap(
    tmp_path: Any, network: Network, desktop_server: DesktopServer, ec2: Any, live: Any, run_id: str,
    figures: Figures,
) -> None:  # fmt: skip
    count = random.Random(7).randint(2, 3) * scale()
    child = _spawn(tmp_path, network, desktop_server, run_id, count=count)
    launched = _ready(child)
    child.kill()  # SIGKILL: no handler, no atexit
    child.wait()
    left_by_crash = live(ec2, run_id)
    reaped = CliRunner().invoke(app, ["reap", "--run-id", run_id])
    figures("cloud_instances_launched_before_crash", len(launched))
    figures("cloud_instances_left_by_crash", len(left_by_crash))
    figures("cloud_instances_after_reap", len(live(ec2, run_id)))
    assert reaped.exit_code == 0, reaped.output
    assert left_by_crash == launched and len(launched) == count
    assert f"{count} terminated" in reaped.output and live(ec2, run_id) == []


async def test_an_instance_never_healthy_is_replaced_and_the_run_goes_on(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any, figures: Figures,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"healthy_timeout": 0.5})
    resolver.kill_next = 1  # the first instance's server never answers
    desktops = 2 * scale()
    async with Fleet(cfg, run_id=run_id, probe=HttpProbe(desktop_server.token), resolve=resolver,
                     owner="chaos@host") as fleet:
        machines = [await fleet.launch(f"aws-{k}", rollout=k) for k in range(desktops)]
        stats = fleet.stats
        alive = live(ec2, run_id)
    figures("cloud_unhealthy_replaced", stats.unhealthy)
    figures("cloud_launched", stats.launched)
    figures("cloud_desktops_serving", len(machines))
    assert stats.unhealthy == 1 and stats.launched == desktops + 1
    assert sorted(alive) == sorted(m.instance_id for m in machines)
    assert all(m.url == desktop_server.url for m in machines) and live(ec2, run_id) == []
