"""Shared pieces of the fleet tests: fake credentials, server records, the loopback resolver,
and a port that drops connections the way a security group does."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws import InstanceRecord, Reach, upstream

#: Fake credentials; tests assert they never reach a log line or a written file.
FAKE_KEY_ID = "AKIAFAKE" + secrets.token_hex(6).upper()
FAKE_SECRET = "fake-secret-" + secrets.token_hex(16)
REGION = "us-east-1"
#: desktop-env's image for us-east-1 at 1920x1080 (read from the installed package).
IMAGE = upstream().images["us-east-1"]["1920x1080"]


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
        "AWS_ENDPOINT_URL": moto_url,  # the TTL schedules' scheduler, sts and iam too
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    }


def free_port() -> int:
    """A loopback port nothing listens on (a connection is refused: the path is open)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def dropping_port() -> Iterator[int]:
    """A loopback port whose SYNs go unanswered, as a security group drops them: a listener
    with a full accept queue that never accepts (the kernel then drops new SYNs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield port
    finally:
        for one in (*fillers, listener):
            one.close()


@dataclass
class LoopbackResolver:
    """Maps every instance to the loopback server, its other ports to closed loopback ports
    (refused: open to the host, nothing listening yet), as at an instance's own address;
    listed instances get a dead server port instead."""

    url: str
    seen: list[str] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)
    #: How many of the next new instances get a dead address.
    kill_next: int = 0
    ports: dict[str, int] = field(default_factory=lambda: {"chromium": free_port(), "vlc": free_port(),
                                                            "vnc": free_port()})

    def __call__(self, instance: InstanceRecord) -> Reach:
        assert instance.private_ip and instance.private_ip.startswith("172.31."), instance
        if instance.id not in self.seen:
            self.seen.append(instance.id)
            if self.kill_next:
                self.kill_next -= 1
                self.dead.add(instance.id)
        server = 9 if instance.id in self.dead else int(self.url.rsplit(":", 1)[1])
        return Reach(host="127.0.0.1", ports={"server": server, **self.ports}, direct=True)


def live_ids(ec2: Any, run: str) -> list[str]:
    """Ids of the run's instances that are not terminated (as moto sees them)."""
    reply = ec2.describe_instances(
        Filters=[{"Name": "tag:agent-s3:run", "Values": [run]},
                 {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    )  # fmt: skip
    return sorted(i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"])
