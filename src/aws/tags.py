"""The tags every fleet instance carries, and the instance record read back from EC2.

Tags are the source of truth for what belongs to whom: a reaper on another machine, or a
later process after a crash, finds this project's instances by the marker tag and decides
from the run, launcher and expiry tags whether they are orphans.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXPIRES",
    "FLEET",
    "HOST",
    "MARKER",
    "MARKER_VALUE",
    "OWNER",
    "PID",
    "ROLLOUT",
    "RUN",
    "TASK",
    "InstanceRecord",
    "format_time",
    "instance_tags",
    "parse_time",
]

MARKER = "agent-s3"
MARKER_VALUE = "osworld-desktop"
RUN = "agent-s3:run"
FLEET = "agent-s3:fleet"
TASK = "agent-s3:task"
ROLLOUT = "agent-s3:rollout"
OWNER = "agent-s3:owner"
HOST = "agent-s3:host"
PID = "agent-s3:pid"
EXPIRES = "agent-s3:expires"

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: EC2's ``StateTransitionReason``, e.g. "User initiated (2017-07-31 18:52:13 GMT)".
_REASON_TIME = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def format_time(epoch: float) -> str:
    """UTC, second precision, sortable as text."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime(_TIME_FORMAT)


def parse_time(text: str) -> float | None:
    try:
        return dt.datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


def instance_tags(
    *,
    run_id: str,
    fleet_id: str,
    owner: str,
    host: str,
    pid: int,
    task: str,
    rollout: int | None,
    expires_at: float | None,
) -> dict[str, str]:
    """The tags of one launch (values trimmed to EC2's 256 characters)."""
    tags = {
        MARKER: MARKER_VALUE,
        RUN: run_id,
        FLEET: fleet_id,
        TASK: task,
        ROLLOUT: "" if rollout is None else str(rollout),
        OWNER: owner,
        HOST: host,
        PID: str(pid),
        "Name": f"agent-s3 {run_id} {task or '-'} {'' if rollout is None else rollout}".strip(),
    }
    if expires_at is not None:
        tags[EXPIRES] = format_time(expires_at)
    return {k: v[:256] for k, v in tags.items()}


@dataclass(frozen=True)
class InstanceRecord:
    """One instance as EC2 describes it, with this project's tags picked out."""

    id: str
    region: str
    state: str
    instance_type: str
    image_id: str
    private_ip: str | None
    public_ip: str | None
    launched_at: float | None
    tags: Mapping[str, str] = field(default_factory=dict)
    #: When EC2 says its state last changed (from ``StateTransitionReason``), if it says.
    changed_at: float | None = None
    subnet_id: str | None = None

    @classmethod
    def from_ec2(cls, item: Mapping[str, Any], region: str) -> InstanceRecord:
        launch = item.get("LaunchTime")
        reason = _REASON_TIME.search(str(item.get("StateTransitionReason") or ""))
        changed = (dt.datetime.strptime(reason.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC).timestamp()
                   if reason else None)
        return cls(
            id=item["InstanceId"],
            region=region,
            state=item.get("State", {}).get("Name", "unknown"),
            instance_type=item.get("InstanceType", ""),
            image_id=item.get("ImageId", ""),
            private_ip=item.get("PrivateIpAddress") or None,
            public_ip=item.get("PublicIpAddress") or None,
            launched_at=launch.timestamp() if isinstance(launch, dt.datetime) else None,
            tags={t["Key"]: t.get("Value", "") for t in item.get("Tags", [])},
            changed_at=changed,
            subnet_id=item.get("SubnetId") or None,
        )

    @property
    def run_id(self) -> str:
        return self.tags.get(RUN, "")

    @property
    def expires_at(self) -> float | None:
        raw = self.tags.get(EXPIRES)
        return parse_time(raw) if raw else None

    def expired(self, now: float) -> bool:
        expires = self.expires_at
        return expires is not None and expires <= now

    @property
    def launcher(self) -> tuple[str, int] | None:
        """(host, pid) of the process that launched it, if tagged."""
        try:
            return self.tags[HOST], int(self.tags[PID])
        except (KeyError, ValueError):
            return None
