"""Each instance's time to live, ended in the cloud as desktop-env ends it.

desktop-env schedules, right after each launch, a one-time EventBridge Scheduler schedule
(``osworld-ttl-<instance>-<epoch>``, ``at(<UTC now + TTL>)``, deleted after it runs) whose
target is EC2's ``TerminateInstances`` with the instance's id; the role the scheduler
assumes is ``AWS_SCHEDULER_ROLE_ARN``, else the role ``AWS_SCHEDULER_ROLE_NAME`` of this
account (created, with a policy allowing only ``ec2:TerminateInstances`` and
``ec2:DescribeInstances``, when missing and ``AWS_AUTO_CREATE_SCHEDULER_ROLE`` allows).
The same is done here with the fleet's own session, the role resolved once per fleet
instead of once per instance. So a killed run's instances end at their TTL even when
nothing runs on this host any more and the image runs no user data; ``agent-s3 aws reap``
remains for the impatient. A schedule that cannot be made is a warning, counted, as in
desktop-env; the instance is still tagged with its expiry for `reap`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from .config import FleetConfig
from .upstream import upstream

__all__ = ["TTLScheduler"]

_log = logging.getLogger("aws.ttl")
_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["ec2:TerminateInstances", "ec2:DescribeInstances"], "Resource": "*"}]}
#: The message of the race where IAM has not yet propagated a new role's trust.
_NOT_YET_TRUSTED = "must allow AWS EventBridge Scheduler to assume the role"
_ATTEMPTS = 6
_RACE_WAIT_S = 10.0


def _not_yet_trusted(error: BaseException) -> bool:
    """The scheduler refused a role IAM has not finished trusting yet (asked again)."""
    if not isinstance(error, ClientError):
        return False
    found = error.response.get("Error", {})
    return found.get("Code") == "ValidationException" and _NOT_YET_TRUSTED in found.get("Message", "")


class TTLScheduler:
    """Makes the termination schedules of one fleet (blocking calls, thread-safe)."""

    def __init__(self, cfg: FleetConfig, session: Any, region: str) -> None:
        self.cfg = cfg
        self.region = region
        self._session = session
        self._lock = threading.Lock()
        self._role: str | None = None
        self._role_failed: str | None = None
        self.made = 0
        self.failed = 0

    def _client(self, service: str) -> Any:
        return self._session.client(service, region_name=self.region, endpoint_url=self.cfg.endpoint_url)

    def role_arn(self) -> str | None:
        """The role's ARN (resolved once); None, with the reason kept, when it cannot be had."""
        with self._lock:
            if self._role is None and self._role_failed is None:
                try:
                    self._role = self._resolve()
                except (ClientError, BotoCoreError, ValueError) as exc:
                    self._role_failed = f"{type(exc).__name__}: {exc}"
            return self._role

    def _resolve(self) -> str:
        if self.cfg.scheduler_role_arn:
            return self.cfg.scheduler_role_arn
        name = self.cfg.scheduler_role_name or "osworld-scheduler-ec2-terminate"
        account = self._client("sts").get_caller_identity()["Account"]
        iam = self._client("iam")
        try:
            role = iam.get_role(RoleName=name)["Role"]
        except ClientError:
            if not self.cfg.auto_create_scheduler_role:
                raise ValueError(f"scheduler role {name} does not exist and auto_create_scheduler_role is off") from None
            iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(_TRUST))
            role = iam.get_role(RoleName=name)["Role"]
        if "scheduler.amazonaws.com" not in json.dumps(role.get("AssumeRolePolicyDocument", {})):
            iam.update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(_TRUST))
        inline = f"{name}-inline"
        try:
            iam.get_role_policy(RoleName=name, PolicyName=inline)
        except ClientError:
            iam.put_role_policy(RoleName=name, PolicyName=inline, PolicyDocument=json.dumps(_POLICY))
        time.sleep(self.cfg.iam_propagation_wait)  # IAM propagates roles slowly (desktop-env waits 8 s too)
        return f"arn:aws:iam::{account}:role/{name}"

    def request(self, instance_id: str, ttl_seconds: float, now: float, role_arn: str) -> dict[str, Any]:
        """`create_schedule` arguments for one instance (what desktop-env sends)."""
        up = upstream()
        eta = dt.datetime.fromtimestamp(now + ttl_seconds, dt.UTC)
        return {
            "Name": f"{up.schedule_prefix}{instance_id}-{int(now)}",
            "ScheduleExpression": f"at({eta.strftime('%Y-%m-%dT%H:%M:%S')})",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": up.schedule_action_after_completion,
            "Target": {"Arn": up.scheduler_target, "RoleArn": role_arn,
                       "Input": json.dumps({"InstanceIds": [instance_id]}, separators=(",", ":"))},
            "State": "ENABLED",
            "Description": f"OSWorld TTL terminate for {instance_id}",
        }

    def schedule(self, instance_id: str, ttl_seconds: float) -> str | None:
        """Schedule the instance's termination; the schedule's name, or None (warned)."""
        role = self.role_arn()
        if role is None:
            self.failed += 1
            _log.warning("no TTL schedule for %s (%s); it ends by `agent-s3 aws reap` or the fleet's own exit",
                         instance_id, self._role_failed)
            return None
        request = self.request(instance_id, ttl_seconds, time.time(), role)
        client = self._client("scheduler")
        try:
            for attempt in Retrying(retry=retry_if_exception(_not_yet_trusted), stop=stop_after_attempt(_ATTEMPTS),
                                    wait=wait_fixed(_RACE_WAIT_S), reraise=True):
                with attempt:
                    client.create_schedule(**request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            self.failed += 1
            _log.warning("no TTL schedule for %s (%s: %s)", instance_id, error.get("Code"), error.get("Message"))
            return None
        except BotoCoreError as exc:
            self.failed += 1
            _log.warning("no TTL schedule for %s (%s)", instance_id, type(exc).__name__)
            return None
        self.made += 1
        return str(request["Name"])
