"""The fleet against a moto EC2 server over HTTP, with the project's controller server as the VM's."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from typing import Any

import boto3
import pytest
from aws_helpers import FAKE_KEY_ID, FAKE_SECRET, IMAGE, DesktopServer, LoopbackResolver, Network

from aws import (
    CostCapReached,
    Fleet,
    FleetCapReached,
    FleetClosed,
    FleetConfig,
    FleetConfigError,
    FleetError,
    HttpProbe,
    InstanceRecord,
    Reach,
    UnhealthyDesktop,
    server_address,
    upstream,
)
from aws.tags import EXPIRES, FLEET, MARKER, MARKER_VALUE, OWNER, ROLLOUT, RUN, TASK, parse_time

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def _fleet(cfg: FleetConfig, run_id: str, server: DesktopServer, resolver: LoopbackResolver, **kw: Any) -> Fleet:
    return Fleet(cfg, run_id=run_id, probe=HttpProbe(server.token), resolve=resolver, owner="tester@host", **kw)


def _tags(ec2: Any, instance_id: str) -> dict[str, str]:
    item = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def _instance(ec2: Any, instance_id: str) -> dict[str, Any]:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


async def test_launch_tags_ttl_network_and_close(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    network: Network, ec2: Any, live: Any, caplog: pytest.LogCaptureFixture, moto: Any,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="aws")
    scheduler = boto3.session.Session(region_name="us-east-1").client("scheduler", endpoint_url=moto.url)
    before = time.time()
    async with _fleet(fleet_config, run_id, desktop_server, resolver) as fleet:
        machines = await asyncio.gather(*(fleet.launch(f"aws-{k}", task="task-a", rollout=k) for k in range(3)))
        ids = sorted(m.instance_id for m in machines)  # type: ignore[misc]
        assert live(ec2, run_id) == ids
        for k, m in enumerate(machines):
            assert m.url == desktop_server.url and not m.used
            item = _instance(ec2, m.instance_id)  # type: ignore[arg-type]
            assert item["State"]["Name"] == "running"
            assert item["ImageId"] == IMAGE and item["InstanceType"] == upstream().instance_type
            assert item["SubnetId"] == network.subnet_id and item.get("PublicIpAddress")  # a public IP, as desktop-env
            groups = [g["GroupId"] for g in item["NetworkInterfaces"][0]["Groups"]]
            assert groups == [network.security_group_id]
            tags = _tags(ec2, m.instance_id)  # type: ignore[arg-type]
            assert tags[MARKER] == MARKER_VALUE and tags[RUN] == run_id and tags[FLEET] == fleet.fleet_id
            assert tags[TASK] == "task-a" and tags[ROLLOUT] == str(k) and tags[OWNER] == "tester@host"
            expires = parse_time(tags[EXPIRES])
            assert expires is not None and before + 180 * 60 - 2 <= expires <= time.time() + 180 * 60 + 2
            behaviour = ec2.describe_instance_attribute(
                InstanceId=m.instance_id, Attribute="instanceInitiatedShutdownBehavior"
            )["InstanceInitiatedShutdownBehavior"]["Value"]
            assert behaviour == "terminate"
            user_data = ec2.describe_instance_attribute(InstanceId=m.instance_id, Attribute="userData")
            assert "Value" not in user_data.get("UserData", {})  # no user data, as desktop-env (its TTL is cloud-side)
            # The TTL is an EventBridge Scheduler schedule that terminates the instance, as desktop-env makes it.
            (found,) = scheduler.list_schedules(NamePrefix=f"osworld-ttl-{m.instance_id}-")["Schedules"]
            schedule = scheduler.get_schedule(Name=found["Name"])
            assert json.loads(schedule["Target"]["Input"]) == {"InstanceIds": [m.instance_id]}
            assert schedule["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:ec2:terminateInstances"
            at = dt.datetime.strptime(schedule["ScheduleExpression"], "at(%Y-%m-%dT%H:%M:%S)").replace(tzinfo=dt.UTC)
            assert before + 180 * 60 - 2 <= at.timestamp() <= time.time() + 180 * 60 + 2
        assert fleet.stats.launched == 3 and fleet.stats.unhealthy == 0 and fleet.ttl.made == 3
    assert live(ec2, run_id) == []
    assert fleet.stats.terminated == 3
    assert all(_instance(ec2, i)["State"]["Name"] == "terminated" for i in ids)
    text = caplog.text
    assert ids[0] in text  # the fleet does log what it launches...
    assert FAKE_KEY_ID not in text and FAKE_SECRET not in text  # ...but never the credentials


async def test_revert_relaunches_a_used_desktop_and_skips_an_unused_one(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    async with _fleet(fleet_config, run_id, desktop_server, resolver) as fleet:
        machine = await fleet.launch("aws-1", task="t", rollout=4)
        first = machine.instance_id
        assert await fleet.revert(machine) is False
        assert machine.instance_id == first and fleet.stats.reverts_skipped == 1
        assert fleet.stats.launched == 1

        machine.mark_used()
        assert await fleet.revert(machine) is True
        second = machine.instance_id
        assert second != first and not machine.used and machine.url == desktop_server.url
        assert _instance(ec2, first)["State"]["Name"] == "terminated"  # type: ignore[arg-type]
        assert live(ec2, run_id) == [second]
        assert _tags(ec2, second)[ROLLOUT] == "4"  # type: ignore[arg-type]
        assert fleet.stats.reverts == 1 and fleet.stats.launched == 2 and machine.launches == 2

        await fleet.relabel(machine, task="other", rollout=7)
        assert _tags(ec2, second)[TASK] == "other"  # type: ignore[arg-type]
        machine.mark_used()
        await fleet.revert(machine)
        assert _tags(ec2, machine.instance_id)[ROLLOUT] == "7"  # type: ignore[arg-type]
    assert live(ec2, run_id) == []


async def test_concurrency_cap_refuses_clearly(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"max_instances": 2})
    async with _fleet(cfg, run_id, desktop_server, resolver) as fleet:
        await fleet.launch("aws-1")
        machine = await fleet.launch("aws-2")
        with pytest.raises(FleetCapReached, match=r"already holds 2 instances.*raise max_instances"):
            await fleet.launch("aws-3")
        assert len(live(ec2, run_id)) == 2
        await fleet.release(machine)  # a slot frees up
        await fleet.launch("aws-4")
        assert len(live(ec2, run_id)) == 2


async def test_cost_cap_refuses_before_launching(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    # $1/h, 60 min TTL: each live instance commits $1; a $2.50 cap holds two.
    cfg = fleet_config.model_copy(update={"prices": {"t3.medium": 1.0}, "ttl_minutes": 60, "max_cost": 2.5})
    async with _fleet(cfg, run_id, desktop_server, resolver) as fleet:
        first = await fleet.launch("aws-1")
        await fleet.launch("aws-2")
        assert fleet.costs.committed(time.time()) == pytest.approx(2.0, abs=0.01)
        with pytest.raises(CostCapReached, match=r"\$3\.00, over its \$2\.50 cap: raise max_cost"):
            await fleet.launch("aws-3")
        assert len(live(ec2, run_id)) == 2 and fleet.stats.launched == 2
        # Terminating one leaves only what it actually ran (one billed minute): room again.
        await fleet.release(first)
        await fleet.launch("aws-4")
        assert fleet.costs.spent(time.time()) < 0.1
    async with _fleet(cfg, run_id + "-at-once", desktop_server, resolver) as fleet:
        results = await asyncio.gather(*(fleet.launch(f"aws-{k}") for k in range(3)), return_exceptions=True)
        refused = [r for r in results if isinstance(r, CostCapReached)]
        assert len(refused) == 1 and len(live(ec2, run_id + "-at-once")) == 2  # launches on the wire count too
    unpriced = fleet_config.model_copy(update={"instance_type": "x9.huge", "max_cost": 5.0})
    async with _fleet(unpriced, run_id, desktop_server, resolver) as fleet:
        with pytest.raises(CostCapReached, match=r"no hourly price for x9\.huge"):
            await fleet.launch("aws-1")


async def test_unhealthy_instance_is_replaced_and_counted(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"healthy_timeout": 0.5})
    resolver.kill_next = 1
    async with _fleet(cfg, run_id, desktop_server, resolver) as fleet:
        machine = await fleet.launch("aws-1")
        dead = next(iter(resolver.dead))
        assert machine.instance_id != dead and machine.url == desktop_server.url
        assert _instance(ec2, dead)["State"]["Name"] == "terminated"
        assert fleet.stats.unhealthy == 1 and fleet.stats.launched == 2 and machine.launches == 2
        assert live(ec2, run_id) == [machine.instance_id]

        resolver.kill_next = 3
        with pytest.raises(UnhealthyDesktop, match="in 3 attempts"):
            await fleet.launch("aws-2")
        assert fleet.stats.unhealthy == 4 and fleet.stats.launched == 5
        assert live(ec2, run_id) == [machine.instance_id]


async def test_cancelled_launch_terminates_its_instance(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"healthy_timeout": 60.0})
    resolver.kill_next = 1
    async with _fleet(cfg, run_id, desktop_server, resolver) as fleet:
        task = asyncio.create_task(fleet.launch("aws-1"))
        for _ in range(400):
            if live(ec2, run_id):
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert live(ec2, run_id) == [] and fleet.live == []


async def test_a_refused_launch_says_what_to_fix_and_close_is_idempotent(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    cfg = fleet_config.model_copy(update={"subnet_id": "subnet-00000000000000000"})
    fleet = _fleet(cfg, run_id, desktop_server, resolver)
    with pytest.raises(FleetError, match=r"EC2 refused to launch a desktop \(InvalidSubnetID\.NotFound\).*check the image, subnet"):
        await fleet.launch("aws-1")
    assert fleet.stats.launched == 0 and live(ec2, run_id) == []
    await fleet.close()
    await fleet.close()
    with pytest.raises(FleetClosed, match="closed"):
        await fleet.launch("aws-2")


def test_config_reads_osworlds_variables_and_explains_mistakes() -> None:
    environ = {"AWS_REGION": "ap-east-1", "AWS_SUBNET_ID": "subnet-1", "AWS_SECURITY_GROUP_ID": "sg-1",
               "AWS_INSTANCE_TYPE": "t3.large", "ENABLE_TTL": "false", "DEFAULT_TTL_MINUTES": "30"}  # fmt: skip
    cfg = FleetConfig().resolved(environ)
    assert (cfg.region, cfg.subnet_id, cfg.security_group_id) == ("ap-east-1", "subnet-1", "sg-1")
    # AWS_INSTANCE_TYPE is only desktop-env's fallback for a revert of an instance of unknown type.
    assert cfg.instance_type == upstream().instance_type
    assert cfg.ttl_seconds is None and cfg.image_id() == upstream().images["ap-east-1"]["1920x1080"]
    explicit = FleetConfig(region="us-east-1", instance_type="t3.xlarge", ttl_minutes=10).resolved(environ)
    assert (explicit.region, explicit.instance_type, explicit.subnet_id) == ("us-east-1", "t3.xlarge", "subnet-1")
    network = {"AWS_SUBNET_ID": "subnet-1", "AWS_SECURITY_GROUP_ID": "sg-1"}
    defaults = FleetConfig().resolved(network)
    assert (defaults.region, defaults.instance_type, defaults.ttl_seconds) == ("us-east-1", "t3.medium", 180 * 60)
    assert defaults.assign_public_ip and not defaults.public_ip  # a public IP, reached over the private one
    with pytest.raises(FleetConfigError, match="ENABLE_TTL='1': desktop-env reads only true as on"):
        FleetConfig().resolved({**network, "ENABLE_TTL": "1"})
    with pytest.raises(FleetConfigError, match=r"no desktop image for region eu-west-3: add images\.eu-west-3"):
        FleetConfig(region="eu-west-3").resolved(network).image_id()
    with pytest.raises(FleetConfigError, match="no desktop image for 1280x720 in us-east-1"):
        FleetConfig(screen="1280x720").resolved(network).image_id()
    # desktop-env refuses to start without a subnet or a security group; so does the fleet, in one line.
    for var in network:
        with pytest.raises(FleetConfigError, match=rf"^{var} is not set: .*set environment\.fleet\.") as raised:
            FleetConfig().resolved({k: v for k, v in network.items() if k != var})
        assert "\n" not in str(raised.value)


def test_desktops_are_reached_over_the_private_ip_unless_public_is_asked_for() -> None:
    record = InstanceRecord("i-1", "us-east-1", "running", "t3.medium", IMAGE, "172.31.3.4", "54.1.2.3", None)
    reach = server_address(FleetConfig())(record)
    assert reach == Reach("172.31.3.4", {"server": 5000, "chromium": 9222, "vlc": 8080, "vnc": 5910}, direct=True)
    assert reach.url == "http://172.31.3.4:5000"
    assert server_address(FleetConfig(public_ip=True, server_port=5050))(record).url == "http://54.1.2.3:5050"
    private_only = InstanceRecord("i-2", "us-east-1", "running", "t3.medium", IMAGE, "172.31.3.5", None, None)
    with pytest.raises(FleetError, match="i-2 has no public IP address: launch it in a subnet that assigns public IPs"):
        server_address(FleetConfig(public_ip=True))(private_only)
