"""Nothing outlives the run: a killed launcher's instances are reaped, SIGTERM and Ctrl-C clean up,
and the fake credentials appear in no output and no file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aws_helpers import FAKE_KEY_ID, FAKE_SECRET, DesktopServer, LoopbackResolver, Network
from typer.testing import CliRunner

from aws import Fleet, FleetConfig, HttpProbe, InstanceRecord, orphan_reason
from aws.tags import HOST, PID, RUN
from runner.cli.aws import app

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

CHILD = Path(__file__).with_name("fleet_child.py")


def _spawn(tmp_path: Path, network: Network, server: DesktopServer, run_id: str, **extra: Any) -> subprocess.Popen[str]:
    args = {"run_id": run_id, "count": 2, "url": server.url, "token": server.token,
            "subnet": network.subnet_id, "group": network.security_group_id, **extra}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / f"child-{run_id}.log").open("w"),
        text=True,
        env=os.environ.copy(),
    )


def _ready(child: subprocess.Popen[str]) -> list[str]:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("ready "), f"child said {line!r} (exit {child.poll()})"
    return sorted(line.split()[1:])


def _wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _assert_no_secrets(tmp_path: Path, *texts: str) -> None:
    for text in texts:
        assert FAKE_KEY_ID not in text and FAKE_SECRET not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert FAKE_KEY_ID.encode() not in data and FAKE_SECRET.encode() not in data, path


def test_crashed_launcher_leaves_instances_that_reap_terminates(
    tmp_path: Path, network: Network, desktop_server: DesktopServer, ec2: Any, live: Any, run_id: str
) -> None:
    child = _spawn(tmp_path, network, desktop_server, run_id)
    ids = _ready(child)
    child.kill()  # a host crash: no handler, no atexit
    child.wait()
    assert live(ec2, run_id) == ids

    cli = CliRunner()
    listed = cli.invoke(app, ["ls", "--run-id", run_id])
    assert listed.exit_code == 0, listed.output
    assert all(i in listed.output for i in ids) and run_id in listed.output and "2 instance(s)" in listed.output

    dry = cli.invoke(app, ["reap", "--run-id", run_id, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.count("would terminate i-") == 2 and live(ec2, run_id) == ids

    reaped = cli.invoke(app, ["reap", "--run-id", run_id, "--region", "us-east-1"])
    assert reaped.exit_code == 0, reaped.output
    assert "2 terminated" in reaped.output
    assert live(ec2, run_id) == []
    again = cli.invoke(app, ["reap", "--run-id", run_id])
    assert "0 terminated" in again.output
    _assert_no_secrets(tmp_path, listed.output, dry.output, reaped.output)


def test_sigterm_during_launch_terminates_what_was_launched(
    tmp_path: Path, network: Network, desktop_server: DesktopServer, ec2: Any, live: Any, run_id: str
) -> None:
    child = _spawn(tmp_path, network, desktop_server, run_id, dead=True, healthy_timeout=120.0)
    _wait_for(lambda: len(live(ec2, run_id)) == 2)  # launched, waiting for servers that never answer
    launched = live(ec2, run_id)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == -signal.SIGTERM
    assert live(ec2, run_id) == []
    states = ec2.describe_instances(InstanceIds=launched)["Reservations"]
    assert {i["State"]["Name"] for r in states for i in r["Instances"]} == {"terminated"}
    _assert_no_secrets(tmp_path)


def test_ctrl_c_terminates_what_was_launched(
    tmp_path: Path, network: Network, desktop_server: DesktopServer, ec2: Any, live: Any, run_id: str
) -> None:
    child = _spawn(tmp_path, network, desktop_server, run_id)
    ids = _ready(child)
    assert live(ec2, run_id) == ids
    child.send_signal(signal.SIGINT)
    child.wait(timeout=60)
    assert live(ec2, run_id) == []
    log = next(tmp_path.glob("child-*.log")).read_text()
    assert f"terminated {ids[0]}" in log or f"terminated {ids[1]}" in log  # the fleet said what it did
    _assert_no_secrets(tmp_path)


def test_normal_exit_without_close_terminates_at_exit(
    tmp_path: Path, network: Network, desktop_server: DesktopServer, ec2: Any, live: Any, run_id: str
) -> None:
    child = _spawn(tmp_path, network, desktop_server, run_id, exit_without_closing=True)
    ids = _ready(child)
    assert child.wait(timeout=60) == 0
    assert len(ids) == 1 and live(ec2, run_id) == []
    _assert_no_secrets(tmp_path)


async def test_reap_without_run_id_takes_expired_instances_and_keeps_live_runs(
    fleet_config: FleetConfig, desktop_server: DesktopServer, resolver: LoopbackResolver, ec2: Any,
    live: Any, run_id: str,
) -> None:  # fmt: skip
    probe = HttpProbe(desktop_server.token)
    stale = Fleet(fleet_config, run_id=run_id + "-old", probe=probe, resolve=resolver, clock=lambda: time.time() - 4 * 3600)
    fresh = Fleet(fleet_config, run_id=run_id, probe=probe, resolve=resolver)
    async with stale, fresh:
        old = await stale.launch("aws-1")
        new = await fresh.launch("aws-1")
        out = CliRunner().invoke(app, ["reap"])
        assert out.exit_code == 0, out.output
        assert f"terminated {old.instance_id}" in out.output and "time to live over" in out.output
        assert new.instance_id not in out.output
        assert live(ec2, run_id + "-old") == [] and live(ec2, run_id) == [new.instance_id]


def test_orphan_rules() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    now = time.time()

    def record(**tags: str) -> InstanceRecord:
        return InstanceRecord("i-1", "us-east-1", "running", "t3.xlarge", "ami-1", "172.31.0.5", None, now, tags)

    here = os.uname().nodename
    assert orphan_reason(record(**{RUN: "r", HOST: here, PID: str(os.getpid())}), now=now, host=here) is None
    dead = orphan_reason(record(**{RUN: "r", HOST: here, PID: str(gone.pid)}), now=now, host=here)
    assert dead is not None and str(gone.pid) in dead
    assert orphan_reason(record(**{RUN: "r", HOST: "elsewhere", PID: str(gone.pid)}), now=now, host=here) is None
    assert orphan_reason(record(**{RUN: "r"}), now=now, run_id="r") == "run r"
    assert orphan_reason(record(**{RUN: "r"}), now=now, everything=True) is not None


def test_cli_without_credentials_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for command in (["ls"], ["reap", "--dry-run"]):
        out = CliRunner().invoke(app, command)
        assert out.exit_code == 1
        assert out.output.strip().splitlines()[-1] == (
            "error: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        )
