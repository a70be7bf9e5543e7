"""A moto EC2 server over loopback HTTP, fake credentials, and the project's controller server
standing in for every instance's in-VM server (fake private IPs are mapped to it, never dialled)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from aws_helpers import REGION, DesktopServer, LoopbackResolver, Moto, Network, aws_environ, live_ids, stop

from aws import FleetConfig


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    exe = Path(sys.executable).with_name("moto_server")
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p0"], stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    url = None
    while url is None:
        found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if found:
            url = found.group(1)
        elif proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"moto_server did not start: {log.read_text()[-2000:]}")
        else:
            time.sleep(0.05)
    yield Moto(url, proc, log)
    stop(proc)


@pytest.fixture(autouse=True)
def fake_aws(moto: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_SUBNET_ID", "AWS_SECURITY_GROUP_ID",
                "AWS_INSTANCE_TYPE", "ENABLE_TTL", "DEFAULT_TTL_MINUTES", "AWS_ENDPOINT_URL",
                "AWS_SCHEDULER_ROLE_ARN", "AWS_SCHEDULER_ROLE_NAME", "AWS_AUTO_CREATE_SCHEDULER_ROLE",
                "PROXY_CONFIG_FILE"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env of this machine is read: tests that want one write it here
    env = aws_environ(moto.url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def ec2(moto: Moto) -> object:
    """A plain boto3 client of the moto server, for the tests' own checks."""
    return boto3.session.Session(region_name=REGION).client("ec2", endpoint_url=moto.url)


@pytest.fixture
def network(ec2: object) -> Network:
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]  # type: ignore[attr-defined]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/20")["Subnet"]["SubnetId"]  # type: ignore[attr-defined]
    group = ec2.create_security_group(  # type: ignore[attr-defined]
        GroupName=f"desktops-{secrets.token_hex(3)}", Description="desktops", VpcId=vpc
    )["GroupId"]
    return Network(subnet, group)


@pytest.fixture
def fleet_config(network: Network) -> FleetConfig:
    """Fast polling, OSWorld's network variables' fields set from moto's VPC."""
    return FleetConfig(
        subnet_id=network.subnet_id,
        security_group_id=network.security_group_id,
        healthy_timeout=5.0,
        probe_interval=0.05,
        running_delay=1,
        running_attempts=5,
        max_instances=8,
        port_timeout=1.0,
        iam_propagation_wait=0.0,
        watch_interval=0.2,
    )


@pytest.fixture(scope="session")
def desktop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesktopServer]:
    """Xvfb + `python -m environments.server` with a bearer token, on loopback."""
    folder = tmp_path_factory.mktemp("vm")
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp"],
        pass_fds=[write_fd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        number = pipe.readline().strip().decode()
    token = secrets.token_urlsafe(18)
    (folder / "token").write_text(token)
    port_file, log = folder / "port", folder / "server.log"
    argv = [sys.executable, "-m", "environments.server", "--port", "0", "--port-file", str(port_file),
            "--token-file", str(folder / "token")]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, env={**os.environ, "DISPLAY": f":{number}"}, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            stop(xvfb)
            pytest.fail(f"controller server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.02)
    yield DesktopServer(f"http://127.0.0.1:{port_file.read_text().strip()}", token, proc, log)
    stop(proc)
    stop(xvfb)


@pytest.fixture
def resolver(desktop_server: DesktopServer) -> LoopbackResolver:
    return LoopbackResolver(desktop_server.url)


@pytest.fixture
def run_id() -> str:
    return "test-" + secrets.token_hex(4)


@pytest.fixture
def live() -> Callable[[object, str], list[str]]:
    return live_ids
