"""The few EC2 calls the fleet makes, as plain blocking functions over a boto3 client.

Kept apart from the fleet's bookkeeping so the reaper, the signal handlers and the fleet
share one way of building launch requests, listing tagged instances and terminating them.
boto3 clients are thread-safe; sessions are not, so each client gets its own session.

A launch request is desktop-env's (`aws.upstream`: image, type, one network interface with a
public IP in the given subnet and security group, the root volume, shutdown = terminate) plus,
on purpose: tags (``tag_instances``), an idempotency token, ``DeleteOnTermination`` on the
root volume (no volume outlives its desktop, whatever the image says), and user data only
when ``ttl_user_data`` asks for it. ``tests/aws/test_upstream.py`` holds it against
desktop-env's own request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError

from .config import FleetConfig
from .dotenv import credentials
from .errors import FleetError
from .tags import MARKER, InstanceRecord

__all__ = [
    "DELIBERATE_LAUNCH_DIFFERENCES",
    "LIVE_STATES",
    "CapacityShortage",
    "aws_session",
    "describe",
    "ec2_client",
    "find_tagged",
    "launch_request",
    "run_instance",
    "shutdown_script",
    "terminate",
]

#: States of an instance that still costs money or may come back.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
_NOT_FOUND = ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")


#: Where a launch request differs from desktop-env's on purpose, and why (held against
#: desktop-env's own request by tests/aws/test_upstream.py: any other difference fails it).
DELIBERATE_LAUNCH_DIFFERENCES = {
    "ClientToken": "an idempotency token: a retried call never launches a second instance",
    "TagSpecifications": "tags (run, owner, host, expiry) let `agent-s3 aws reap` find a crashed run's instances",
    "BlockDeviceMappings.0.Ebs.DeleteOnTermination": "no volume outlives its desktop, whatever the image says",
    "UserData": "only with ttl_user_data: the instance also powers itself off at its TTL",
}

#: Error codes with which EC2 says it has no room for this type in this zone now.
_CAPACITY = ("InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity")


class CapacityShortage(FleetError):
    """EC2 has no capacity for this instance type in this subnet's zone now."""

    def __init__(self, instance_type: str, subnet: str, message: str) -> None:
        super().__init__(f"EC2 has no capacity for {instance_type} in the zone of {subnet}: {message}")
        self.instance_type = instance_type
        self.subnet = subnet


def aws_session(region: str, env_file: str | None = None) -> Any:
    """A boto3 session of its own: boto3's usual credential chain, or an OSWorld ``.env``'s
    credentials when the process environment has none (`aws.dotenv`)."""
    return boto3.session.Session(region_name=region, **credentials(env_file))


def ec2_client(region: str, endpoint_url: str | None = None, *, session: Any = None, max_attempts: int = 5) -> Any:
    """A boto3 EC2 client (of `session`, else of a session of its own)."""
    session = session or aws_session(region)
    config = Config(retries={"total_max_attempts": max_attempts, "mode": "standard"}, connect_timeout=10,
                    read_timeout=60)
    return session.client("ec2", endpoint_url=endpoint_url, config=config)


def shutdown_script(ttl_minutes: int) -> str:
    """User data that powers the VM off when its TTL ends (which terminates it, see below).

    cloud-init runs it as root at first boot; `InstanceInitiatedShutdownBehavior=terminate`
    turns the power-off into a termination, so the instance dies even if nobody reaps it.
    """
    return (
        "#!/bin/bash\n"
        "# agent-s3: this desktop terminates itself when its time to live ends.\n"
        f"shutdown -h +{int(ttl_minutes)} 'agent-s3 desktop time to live is over' || "
        f"(sleep {int(ttl_minutes) * 60} && poweroff) &\n"
    )


def launch_request(cfg: FleetConfig, tags: Mapping[str, str], client_token: str, *,
                   subnet_id: str | None = None, instance_type: str | None = None) -> dict[str, Any]:
    """`run_instances` arguments for one desktop from `cfg` (already resolved), in `subnet_id`
    as `instance_type` (a capacity fallback) or the configured ones."""
    request: dict[str, Any] = {
        "MaxCount": 1,
        "MinCount": 1,
        "ImageId": cfg.image_id(),
        "InstanceType": instance_type or cfg.instance_type,
        "ClientToken": client_token,
        "EbsOptimized": True,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "NetworkInterfaces": [{
            "SubnetId": subnet_id or cfg.subnet_id,
            "AssociatePublicIpAddress": cfg.assign_public_ip,
            "DeviceIndex": 0,
            "Groups": [cfg.security_group_id],
        }],
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/sda1",
                "Ebs": {
                    "VolumeSize": cfg.disk_gb,
                    "VolumeType": "gp3",
                    "Iops": cfg.disk_iops,
                    "Throughput": cfg.disk_throughput,
                    "DeleteOnTermination": True,
                },
            }
        ],
    }
    if cfg.tag_instances:
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        request["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
        ]
    ttl = cfg.ttl_seconds
    if ttl is not None and cfg.ttl_user_data:
        # boto3 base64-encodes UserData of run_instances itself.
        request["UserData"] = shutdown_script(max(1, round(ttl / 60)))
    return request


def run_instance(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    """`run_instances`, with the failures a user can fix turned into one `FleetError` line."""
    try:
        return dict(client.run_instances(**request))
    except NoCredentialsError as exc:
        raise FleetError(
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code in _CAPACITY:
            interface = (request.get("NetworkInterfaces") or [{}])[0]
            raise CapacityShortage(request.get("InstanceType", "?"), interface.get("SubnetId", "?"), message) from exc
        if code == "UnauthorizedOperation" and "CreateTags" in message and "TagSpecifications" in request:
            raise FleetError(
                "these credentials may launch instances but not tag them (ec2:CreateTags): grant it, or set "
                "environment.fleet.tag_instances=false (then `agent-s3 aws reap` cannot find this run's "
                "instances; their TTL schedules still end them)") from exc
        raise FleetError(
            f"EC2 refused to launch a desktop ({code}): {message}; check the image, subnet, "
            f"security group and instance type of the fleet configuration, and the account's limits"
        ) from exc


def describe(client: Any, region: str, instance_ids: Iterable[str]) -> list[InstanceRecord]:
    """Records of the given instances; unknown ids are simply missing."""
    ids = list(instance_ids)
    if not ids:
        return []
    try:
        pages = client.get_paginator("describe_instances").paginate(InstanceIds=ids)
        return [InstanceRecord.from_ec2(i, region) for page in pages for r in page["Reservations"] for i in r["Instances"]]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _NOT_FOUND and len(ids) > 1:
            return [rec for one in ids for rec in describe(client, region, [one])]
        if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
            return []
        raise


def find_tagged(
    client: Any,
    region: str,
    tags: Mapping[str, str] | None = None,
    *,
    states: Iterable[str] = LIVE_STATES,
) -> list[InstanceRecord]:
    """This project's instances (marker tag) matching every tag in `tags`."""
    filters = [{"Name": "tag-key", "Values": [MARKER]}, {"Name": "instance-state-name", "Values": list(states)}]
    filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in (tags or {}).items()]
    pages = client.get_paginator("describe_instances").paginate(Filters=filters)
    return [InstanceRecord.from_ec2(i, region) for page in pages for r in page["Reservations"] for i in r["Instances"]]


def terminate(client: Any, instance_ids: Iterable[str]) -> list[str]:
    """Terminate instances (already gone ones are fine); returns the ids asked about."""
    ids = sorted(set(instance_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        try:
            client.terminate_instances(InstanceIds=chunk)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in _NOT_FOUND:
                raise
            for one in chunk:
                try:
                    client.terminate_instances(InstanceIds=[one])
                except ClientError as inner:
                    if inner.response.get("Error", {}).get("Code") not in _NOT_FOUND:
                        raise
    return ids
