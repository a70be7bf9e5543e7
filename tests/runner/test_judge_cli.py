"""``agent-s3 run --rollouts`` and ``agent-s3 judge`` as a user runs them: the scripted demo
policy, narrator and judge on local desktops end to end (subprocesses), a re-judge that
makes no narrative call, and mistakes answered in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import desktops_missing
from typer.testing import CliRunner

from core.llm import Ledger
from core.trajectory import RunLayout
from runner.cli import app

CLI = Path(sys.executable).with_name("agent-s3")


def _cli(*args: str, env_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_S3_ENV_DIR": str(env_dir), "COLUMNS": "200"}
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=240, env=env, check=False)


@pytest.mark.desktop
@pytest.mark.integration
def test_wide_run_then_rejudge_end_to_end(tmp_path: Path) -> None:
    reason = desktops_missing() or (None if CLI.exists() else "the agent-s3 console script is not installed")
    if reason is not None:
        pytest.skip(reason)
    ran = _cli("run", "--task", "mousepad-append-line", "--model", "scripted/demo", "--rollouts", "2",
               "--settle", "0.2", "--out", str(tmp_path / "runs"), "--run-id", "wide2", env_dir=tmp_path / "envs")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "judge mcq/narrative chose rollout" in ran.stdout and "SCRIPTED" in ran.stdout
    layout = RunLayout(tmp_path / "runs", "wide2")
    task = layout.task("mousepad-append-line")
    selection = task.read_selection()
    assert selection is not None and selection.chosen in (0, 1) and selection.candidates == [0, 1]
    result = task.read_result()
    assert result is not None and result.n == 2 and result.selected == selection.chosen
    assert result.selected_score == 1.0 and result.pass_at_n == 1.0
    assert layout.report_path.is_file() and "CHOSEN" in layout.report_path.read_text()
    config = json.loads(layout.config_path.read_text())
    assert config["strategy"] == "wide" and config["wide"]["rollouts"] == 2
    assert config["wide"]["judge_model"]["model"] == "scripted/demo-judge"
    seeds = [task.rollout(k).read_info().seed for k in (0, 1)]
    assert seeds[1] == seeds[0] + 1
    before = Ledger.read(layout.ledger_path)
    assert sum(r.module == "narrative" for r in before) >= 1

    again = _cli("judge", str(layout.path), env_dir=tmp_path / "envs")
    assert again.returncode == 0, again.stderr
    assert "model calls: 0 narrative, 1 judge" in again.stdout
    new = Ledger.read(layout.ledger_path)[len(before):]
    assert [r.module for r in new] == ["judge"]


@pytest.mark.parametrize(("args", "says"), [
    (["judge", "{tmp}/nowhere"], "is not a run folder"),
    (["judge", "{tmp}", "--judge", "best-of"], "unknown judge 'best-of'"),
    (["judge", "{tmp}", "--representation", "video"], "unknown representation 'video'"),
    (["judge", "{tmp}/new", "--import-osworld", "{tmp}"], "needs a judge model: pass --model"),
    (["judge", "{tmp}/new", "--import-osworld", "{tmp}/none", "--model", "openai/x"], "is not a folder"),
    (["report", "{tmp}/nowhere"], "is not a run folder"),
])
def test_mistakes_are_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]
