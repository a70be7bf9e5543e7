"""``agent-s3 run`` with a run id that exists: refused, resumed or replaced, never mixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.integration, pytest.mark.slow]

_SCRIPT = Path(sys.executable).with_name("agent-s3")
_SRC = Path(__file__).resolve().parents[2] / "src"
#: The scripted demo's actions need no 3 s pause each (what these tests check is the run's
#: folder, not the screen).
_SETTLE = ["--settle", "0.2"]


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(_SRC), "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "200"}
    argv = [str(_SCRIPT), "run", "--task", "mousepad-append-line", "--model", "scripted/demo", "--out",
            str(tmp_path / "runs"), "--run-id", "same", *_SETTLE, *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)


def _calls(tmp_path: Path) -> int:
    return len((tmp_path / "runs" / "same" / "ledger.jsonl").read_text().splitlines())


def test_resume_keeps_a_finished_run_and_overwrite_starts_afresh(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    header = tmp_path / "runs" / "same" / "mousepad-append-line" / "rollout-0" / "rollout.json"
    started = json.loads(header.read_text())["started_at"]
    calls = _calls(tmp_path)

    refused = _run(tmp_path)
    assert refused.returncode == 2 and "already exists: pass --resume" in refused.stderr

    resumed = _run(tmp_path, "--resume")
    assert resumed.returncode == 0 and "nothing to run" in resumed.stdout, resumed.stdout + resumed.stderr
    assert json.loads(header.read_text())["started_at"] == started and _calls(tmp_path) == calls

    replaced = _run(tmp_path, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    again = json.loads(header.read_text())
    assert again["started_at"] > started and again["attempts"] == 1  # a new run, not a second attempt
    assert _calls(tmp_path) == calls  # one run's calls in the ledger, not two runs' mixed
    assert (tmp_path / "runs" / "same").stat().st_mode & 0o777 == 0o700


def test_a_full_disk_ends_the_run_with_one_line_and_a_finished_header(small_disk: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(_SRC), "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "200"}
    argv = [str(_SCRIPT), "run", "--task", "mousepad-append-line", "--model", "scripted/demo", "--out",
            str(small_disk), "--run-id", "full", *_SETTLE]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 2
    assert done.stderr.startswith("error: No space left on device (") and len(done.stderr.splitlines()) == 1
    assert "free some space" in done.stderr
    header = json.loads((small_disk / "full" / "mousepad-append-line" / "rollout-0" / "rollout.json").read_text())
    assert header["status"] == "errored" and "No space left" in header["reason"]


def test_bench_local_runs_the_scripted_demo_over_the_tasks_it_has_plans_for(tmp_path: Path) -> None:
    """It crashed with a traceback (the demo registered one task's plan, a bench has many)."""
    env = {**os.environ, "PYTHONPATH": str(_SRC), "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "200"}
    argv = [str(_SCRIPT), "bench", "local", "--model", "scripted/demo", "--run-id", "demo", "--out",
            str(tmp_path / "runs"), "--task", "mousepad-append-line", "--task", "terminal-make-dirs",
            "--task", "mousepad-fix-typos", "--parallel", "2", *_SETTLE]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "skipped mousepad-fix-typos: no plan of the scripted demo policy" in done.stdout
    for task in ("mousepad-append-line", "terminal-make-dirs"):  # each answered from its own plan
        result = json.loads((tmp_path / "runs" / "demo" / task / "result.json").read_text())
        assert result["selected_score"] == 1.0, (task, result)
