"""The fleet against the installed desktop-env's own AWS provider: the image table, the
instance type, the network interface, the root volume, the variables it reads and requires,
the TTL (its own scheduling function, run against moto beside the fleet's), the ports and
the proxy pool file. Any difference that is not one of the fleet's stated ones fails."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_helpers import REGION, Moto, Network

from aws import ENV_VARS, FleetConfig, FleetConfigError, upstream
from aws.comparison import compare
from aws.ec2 import DELIBERATE_LAUNCH_DIFFERENCES, launch_request
from aws.ttl import TTLScheduler

#: desktop-env variables the fleet does not read, and why.
NOT_READ = {"AWS_INSTANCE_TYPE": "desktop-env reads it only when a revert cannot tell the old instance's type"}


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, list | tuple):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def test_the_default_fleet_is_desktop_envs() -> None:
    up = upstream()
    assert up.version == "1.0.2"
    cfg = FleetConfig(subnet_id="subnet-1", security_group_id="sg-1").resolved({})
    assert cfg.images == up.images and cfg.image_id() == up.images["us-east-1"]["1920x1080"]
    assert cfg.instance_type == up.instance_type == "t3.medium"
    assert cfg.assign_public_ip is True and up.launch["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is True
    assert (cfg.ttl_enabled, cfg.ttl_minutes) == (up.ttl_enabled, up.ttl_minutes) == (True, 180)
    assert cfg.scheduler_role_name == up.env_defaults["AWS_SCHEDULER_ROLE_NAME"]
    assert cfg.proxy_config_file == up.proxy_config_file == "evaluation_examples/settings/proxy/dataimpulse.json"
    assert (cfg.server_port, cfg.chromium_port, cfg.vlc_port) == (up.ports["server"], up.ports["chromium"],
                                                                   up.ports["vlc"])
    assert cfg.vnc_port == up.aws_vnc_port == 5910
    # Every variable read is one desktop-env reads; every one it reads is read, or said why not.
    assert set(ENV_VARS) <= set(up.env_defaults)
    assert set(up.env_defaults) - set(ENV_VARS) == set(NOT_READ)
    # The variables desktop-env refuses to start without are refused without here too.
    for var in up.required_env:
        if var == "AWS_REGION":
            continue  # desktop-env checks it is set, then launches in its region argument (us-east-1)
        with pytest.raises(FleetConfigError, match=var):
            FleetConfig().resolved({v: "x" for v in up.required_env if v != var})
    # And the run's label says so.
    assert compare(cfg).comparable and "EC2 desktops as desktop-env 1.0.2 launches them" in compare(cfg).note


def test_the_launch_request_is_desktop_envs_but_for_the_stated_differences() -> None:
    up = upstream()
    cfg = FleetConfig(subnet_id="subnet-1", security_group_id="sg-1", ttl_user_data=True).resolved({})
    mine = _flat(launch_request(cfg, {"agent-s3": "osworld-desktop"}, "token"))
    theirs = _flat(up.launch)
    # desktop-env's values that are not literals: the AMI, its INSTANCE_TYPE, the two variables.
    stand_in = {"<ami_id>": cfg.image_id(), "<INSTANCE_TYPE>": up.instance_type,
                "<os.getenv('AWS_SUBNET_ID')>": "subnet-1", "<os.getenv('AWS_SECURITY_GROUP_ID')>": "sg-1"}
    theirs = {k: stand_in.get(v, v) if isinstance(v, str) else v for k, v in theirs.items()}
    assert not [v for v in theirs.values() if isinstance(v, str) and v.startswith("<")], theirs
    differing = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    stated = {k for k in differing if any(k == d or k.startswith(d + ".") for d in DELIBERATE_LAUNCH_DIFFERENCES)}
    assert differing - stated == set(), {k: (mine.get(k), theirs.get(k)) for k in differing - stated}
    assert {d for d in DELIBERATE_LAUNCH_DIFFERENCES if any(k == d or k.startswith(d + ".") for k in differing)} \
        == set(DELIBERATE_LAUNCH_DIFFERENCES)  # each stated difference is real, none is stale
    # Another instance type than desktop-env's is an experiment of its own: the label says so.
    other = compare(cfg.model_copy(update={"instance_type": "t3.xlarge"}))
    assert not other.comparable and "instance type t3.xlarge (desktop-env: t3.medium)" in other.note


def test_the_ttl_schedule_is_the_one_desktop_env_makes(moto: Moto, network: Network,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """desktop-env's own `schedule_instance_termination` and the fleet's, side by side on moto."""
    from desktop_env.providers.aws.scheduler_utils import schedule_instance_termination

    session = boto3.session.Session(region_name=REGION)
    iam = session.client("iam", endpoint_url=moto.url)
    role = iam.create_role(RoleName="ttl-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    import logging

    schedule_instance_termination(REGION, "i-0aaaaaaaaaaaaaaaa", 3600, role, logging.getLogger("test"))
    cfg = FleetConfig(subnet_id=network.subnet_id, security_group_id=network.security_group_id,
                      scheduler_role_arn=role).resolved({})
    ttl = TTLScheduler(cfg, session, REGION)
    assert ttl.schedule("i-0bbbbbbbbbbbbbbbb", 3600) is not None
    scheduler = session.client("scheduler", endpoint_url=moto.url)
    theirs, mine = (scheduler.get_schedule(Name=scheduler.list_schedules(NamePrefix=f"osworld-ttl-{i}-")
                                           ["Schedules"][0]["Name"]) for i in ("i-0aaaaaaaaaaaaaaaa",
                                                                               "i-0bbbbbbbbbbbbbbbb"))
    same = ("FlexibleTimeWindow", "State", "ActionAfterCompletion")
    assert {k: mine.get(k) for k in same} == {k: theirs.get(k) for k in same}
    assert mine["Target"]["Arn"] == theirs["Target"]["Arn"] and mine["Target"]["RoleArn"] == role
    assert json.loads(mine["Target"]["Input"]) == {"InstanceIds": ["i-0bbbbbbbbbbbbbbbb"]}
    assert mine["Target"]["Input"] == theirs["Target"]["Input"].replace("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb")
    assert mine["Description"] == theirs["Description"].replace("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb")
    for schedule in (mine, theirs):
        assert schedule["ScheduleExpression"].startswith("at(") and len(schedule["ScheduleExpression"]) == 23


class _Scheduler:
    """A scheduler client refusing the first `refusals` calls with IAM's trust race."""

    def __init__(self, refusals: int, message: str) -> None:
        self.refusals, self.message, self.calls = refusals, message, 0

    def create_schedule(self, **_: Any) -> None:
        from botocore.exceptions import ClientError

        self.calls += 1
        if self.calls <= self.refusals:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": self.message}}, "CreateSchedule")


@pytest.mark.parametrize(("refusals", "made"), [(2, True), (6, False)])
def test_the_ttl_asks_again_while_iam_has_not_trusted_the_role(
    monkeypatch: pytest.MonkeyPatch, network: Network, refusals: int, made: bool
) -> None:
    """A new role's trust reaches the scheduler late: its refusal is asked again, at most six
    times; any other refusal is final at once (the instance then ends by reap or exit)."""
    import aws.ttl as ttl_module

    monkeypatch.setattr(ttl_module, "_RACE_WAIT_S", 0.0)
    race = _Scheduler(refusals, "The execution role you provide must allow AWS EventBridge Scheduler to assume the role.")
    cfg = FleetConfig(subnet_id=network.subnet_id, security_group_id=network.security_group_id,
                      scheduler_role_arn="arn:aws:iam::123456789012:role/ttl").resolved({})
    session = type("Session", (), {"client": lambda self, *_a, **_k: race})()
    ttl = TTLScheduler(cfg, session, REGION)
    assert (ttl.schedule("i-0ccccccccccccccccc", 3600) is not None) is made
    assert race.calls == min(refusals + 1, 6) and (ttl.made, ttl.failed) == ((1, 0) if made else (0, 1))
    other = _Scheduler(1, "Role is not valid")
    session = type("Session", (), {"client": lambda self, *_a, **_k: other})()
    ttl = TTLScheduler(cfg, session, REGION)
    assert ttl.schedule("i-0ddddddddddddddddd", 3600) is None and other.calls == 1
