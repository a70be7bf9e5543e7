"""Ctrl-C during ``agent-s3 run --rollouts 3``: every rollout stops at once (recorded as
interrupted), no desktop outlives the command, and the report of what ran is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import desktops_missing

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

CLI = Path(sys.executable).with_name("agent-s3")


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry}: {cmdline[:120]}")
    return found


def test_ctrl_c_stops_every_rollout_and_every_desktop(tmp_path: Path) -> None:
    reason = desktops_missing() or (None if CLI.exists() else "the agent-s3 console script is not installed")
    if reason is not None:
        pytest.skip(reason)
    runs = tmp_path / "runs"
    env = {**os.environ, "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "160"}
    # A long settle keeps the rollouts busy in their first step.
    proc = subprocess.Popen([str(CLI), "run", "--task", "mousepad-append-line", "--model", "scripted/demo",
                             "--rollouts", "3", "--settle", "10", "--out", str(runs), "--run-id", "int"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        task_dir = runs / "int" / "mousepad-append-line"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(task_dir.glob("rollout-*/rollout.json"))) < 3:
            time.sleep(0.1)
        assert len(list(task_dir.glob("rollout-*/rollout.json"))) == 3, "the rollouts never started"
        time.sleep(1.0)  # into the first step
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 15, "Ctrl-C waited for the rollouts to finish"
    assert proc.returncode == 130 and b"interrupted" in out
    for k in range(3):
        header = json.loads((task_dir / f"rollout-{k}" / "rollout.json").read_text())
        assert header["status"] == "errored" and "interrupted" in header["reason"]
    assert (runs / "int" / "report.html").is_file()
    assert _processes_mentioning(str(tmp_path / "envs")) == [], "a desktop outlived Ctrl-C"
