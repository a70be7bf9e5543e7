"""Shared pieces of the fleet tests: fake credentials, server records, the loopback resolver."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws import InstanceRecord

#: Fake credentials; tests assert they never reach a log line or a written file.
FAKE_KEY_ID = "AKIAFAKE" + secrets.token_hex(6).upper()
FAKE_SECRET = "fake-secret-" + secrets.token_hex(16)
REGION = "us-east-1"
IMAGE = "ami-0d23263edb96951d8"


@dataclass
class Moto:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Network:
    subnet_id: str
    security_group_id: str


@dataclass
class DesktopServer:
    url: str
    token: str
    proc: subprocess.Popen[bytes]
    log: Path


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def aws_environ(moto_url: str) -> dict[str, str]:
    """Variables that point boto3 (here and in child processes) at moto with fake keys."""
    return {
        "AWS_ACCESS_KEY_ID": FAKE_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL_EC2": moto_url,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    }


class LoopbackResolver:
    """Maps every instance to the loopback server; listed instances to a dead port instead."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[str] = []
        self.dead: set[str] = set()
        #: How many of the next new instances get a dead address.
        self.kill_next = 0

    def __call__(self, instance: InstanceRecord) -> str:
        assert instance.private_ip and instance.private_ip.startswith("172.31."), instance
        if instance.id not in self.seen:
            self.seen.append(instance.id)
            if self.kill_next:
                self.kill_next -= 1
                self.dead.add(instance.id)
        return "http://127.0.0.1:9" if instance.id in self.dead else self.url


def live_ids(ec2: Any, run: str) -> list[str]:
    """Ids of the run's instances that are not terminated (as moto sees them)."""
    reply = ec2.describe_instances(
        Filters=[{"Name": "tag:agent-s3:run", "Values": [run]},
                 {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    )  # fmt: skip
    return sorted(i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"])
