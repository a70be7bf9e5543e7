"""Capacity shortages fall back to the instance types and zones the configuration names, never
silently; a launch refused for want of ec2:CreateTags says what to grant or set; an OSWorld
``.env`` configures the fleet and its credentials as desktop-env reads it, without reaching the
process environment.

moto never runs out of capacity nor checks IAM, so EC2's answer is put on the wire where moto's
would be: a hook of the real boto3 client answers chosen RunInstances calls with EC2's error
document (``InsufficientInstanceCapacity``, a server error, which botocore's standard mode
retries before it raises; ``UnauthorizedOperation``, a 403); every other call reaches moto."""

from __future__ import annotations

import logging
import os
from typing import Any
from urllib.parse import parse_qs

import boto3
import pytest
from aws_helpers import FAKE_KEY_ID, FAKE_SECRET, DesktopServer, LoopbackResolver, Moto, Network
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.config import Config

from aws import Fleet, FleetConfig, FleetError, HttpProbe
from aws.dotenv import credentials, osworld_environ

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

_SHORT = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InsufficientInstanceCapacity"
          "</Code><Message>We currently do not have sufficient {kind} capacity in the Availability Zone you "
          "requested.</Message></Error></Errors><RequestID>{rid}</RequestID></Response>")


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> list[bytes]:
        return [self.data]


def short_of(client: Any, shortages: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Answer RunInstances of these (instance type, subnet) pairs as EC2 does without capacity;
    returns every (type, subnet) asked for, in order."""
    asked: list[tuple[str, str]] = []

    def before_send(request: Any, **_: Any) -> AWSResponse | None:
        form = parse_qs(request.body.decode() if isinstance(request.body, bytes) else str(request.body))
        key = (form["InstanceType"][0], form["NetworkInterface.1.SubnetId"][0])
        asked.append(key)
        if key not in shortages:
            return None
        body = _SHORT.format(kind=key[0], rid=f"req-{len(asked)}").encode()
        return AWSResponse(request.url, 500, HTTPHeaders({"Content-Type": "text/xml;charset=UTF-8"}), _Body(body))

    client.meta.events.register("before-send.ec2.RunInstances", before_send)
    return asked


def _client(moto: Moto) -> Any:
    config = Config(retries={"total_max_attempts": 2, "mode": "standard"})  # one retry of a server error
    return boto3.session.Session(region_name="us-east-1").client("ec2", endpoint_url=moto.url, config=config)


def _second_subnet(ec2: Any, network: Network) -> str:
    vpc = ec2.describe_subnets(SubnetIds=[network.subnet_id])["Subnets"][0]["VpcId"]
    return str(ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.16.0/20", AvailabilityZone="us-east-1b")
               ["Subnet"]["SubnetId"])


async def test_a_capacity_shortage_tries_the_named_types_then_zones(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    network: Network, ec2: Any, moto: Moto, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="aws")
    other = _second_subnet(ec2, network)
    cfg = fleet_config.model_copy(update={"instance_type_fallbacks": ["t3.large"], "subnet_fallbacks": [other]})
    client = _client(moto)
    first = network.subnet_id
    asked = short_of(client, {("t3.medium", first), ("t3.large", first)})
    fleet = Fleet(cfg, run_id=run_id, probe=HttpProbe(desktop_server.token), resolve=resolver, client=client)
    async with fleet:
        machine = await fleet.launch("aws-1")
        item = ec2.describe_instances(InstanceIds=[machine.instance_id])["Reservations"][0]["Instances"][0]
        assert (item["InstanceType"], item["SubnetId"]) == ("t3.medium", other)
        # Each short pair asked twice (botocore retries a server error once here), then the next zone.
        assert asked == [("t3.medium", first)] * 2 + [("t3.large", first)] * 2 + [("t3.medium", other)]
        assert fleet.stats.capacity_fallbacks == 1 and fleet.stats.instance_types == {"t3.medium": 1}
        assert f"aws-1 runs as t3.medium in {other}: EC2 had no capacity for t3.medium in {first}, " \
               f"t3.large in {first}" in caplog.text
        asked.clear()
        short_of(client, {("t3.medium", other), ("t3.large", other)})
        with pytest.raises(FleetError, match=r"EC2 has no capacity for t3\.medium in .*: try again later, or name "
                                             r"other types \(instance_type_fallbacks\) or subnets"):
            await fleet.launch("aws-2")
        assert len(fleet.live) == 1


async def test_without_fallbacks_a_shortage_says_what_to_name(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    network: Network, moto: Moto,
) -> None:  # fmt: skip
    client = _client(moto)
    short_of(client, {("t3.medium", network.subnet_id)})
    async with Fleet(fleet_config, run_id=run_id, probe=HttpProbe(desktop_server.token), resolve=resolver,
                     client=client) as fleet:
        with pytest.raises(FleetError) as raised:
            await fleet.launch("aws-1")
        assert str(raised.value).startswith(f"EC2 has no capacity for t3.medium in {network.subnet_id}: ")
        assert fleet.stats.launched == 0


async def test_an_osworld_env_file_configures_the_fleet_and_its_credentials(
    tmp_path: Any, network: Network, desktop_server: DesktopServer, resolver: LoopbackResolver, run_id: str,
    ec2: Any, live: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="aws")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    (tmp_path / ".env").write_text(  # OSWorld's .env, in the folder the run starts from
        f"AWS_REGION=us-east-1\nAWS_SUBNET_ID={network.subnet_id}\nAWS_SECURITY_GROUP_ID={network.security_group_id}\n"
        f"DEFAULT_TTL_MINUTES=45\nAWS_ACCESS_KEY_ID={FAKE_KEY_ID}\nAWS_SECRET_ACCESS_KEY='{FAKE_SECRET}'\n")
    cfg = FleetConfig(healthy_timeout=5.0, probe_interval=0.05, running_delay=1, running_attempts=5,
                      iam_propagation_wait=0.0, port_timeout=1.0)
    async with Fleet(cfg, run_id=run_id, probe=HttpProbe(desktop_server.token), resolve=resolver) as fleet:
        assert (fleet.config.subnet_id, fleet.config.ttl_minutes) == (network.subnet_id, 45)
        machine = await fleet.launch("aws-1")  # signed with the .env's keys: moto accepts them
        assert live(ec2, run_id) == [machine.instance_id]
    assert "AWS_ACCESS_KEY_ID" not in os.environ and "AWS_SUBNET_ID" not in os.environ  # never exported
    assert FAKE_SECRET not in caplog.text and "AWS_SECRET_ACCESS_KEY" in caplog.text  # names, never values
    # The process environment wins over the file, as load_dotenv leaves set variables alone.
    assert osworld_environ(environ={"AWS_SUBNET_ID": "subnet-mine"})["AWS_SUBNET_ID"] == "subnet-mine"
    assert credentials(environ={"AWS_PROFILE": "work"}) == {}
    with pytest.raises(FileNotFoundError, match=r"env_file /nowhere/\.env does not exist"):
        FleetConfig(env_file="/nowhere/.env").resolved()


async def test_without_ec2_create_tags_the_launch_says_what_to_grant_or_set(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    moto: Moto, ec2: Any,
) -> None:  # fmt: skip
    """An IAM policy enough for desktop-env (which never tags) may lack ec2:CreateTags: EC2 then
    refuses a tagged launch with UnauthorizedOperation (an HTTP 403)."""
    client = _client(moto)
    refused = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>UnauthorizedOperation"
               b"</Code><Message>You are not authorized to perform: ec2:CreateTags on resource: "
               b"arn:aws:ec2:us-east-1:123456789012:instance/*</Message></Error></Errors><RequestID>r</RequestID>"
               b"</Response>")

    def before_send(request: Any, **_: Any) -> AWSResponse | None:
        if b"TagSpecification" not in (request.body if isinstance(request.body, bytes) else str(request.body).encode()):
            return None
        return AWSResponse(request.url, 403, HTTPHeaders({"Content-Type": "text/xml"}), _Body(refused))

    client.meta.events.register("before-send.ec2.RunInstances", before_send)
    probe = HttpProbe(desktop_server.token)
    async with Fleet(fleet_config, run_id=run_id, probe=probe, resolve=resolver, client=client) as fleet:
        with pytest.raises(FleetError, match=r"may launch instances but not tag them \(ec2:CreateTags\): grant it, or "
                                             r"set environment\.fleet\.tag_instances=false"):
            await fleet.launch("aws-1")
    untagged = fleet_config.model_copy(update={"tag_instances": False})
    async with Fleet(untagged, run_id=run_id, probe=probe, resolve=resolver, client=client) as fleet:
        machine = await fleet.launch("aws-1")  # as desktop-env launches: no tags
        item = ec2.describe_instances(InstanceIds=[machine.instance_id])["Reservations"][0]["Instances"][0]
        assert not item.get("Tags")
    state = ec2.describe_instances(InstanceIds=[machine.instance_id])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("shutting-down", "terminated")  # closing still ends what it launched
