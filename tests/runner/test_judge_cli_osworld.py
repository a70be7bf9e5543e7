"""``agent-s3 judge RUN_DIR --import-osworld R1 --import-osworld R2``: OSWorld result folders
become rollouts 0 and 1 of a new run and are judged over HTTP (the judge's server runs on
its own thread, as a provider would); judging the run again reuses every fact."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from runner_helpers import threaded_servers
from typer.testing import CliRunner

from core.llm import Ledger, Script
from core.trajectory import RunLayout
from runner.cli import app
from runner.demo_judge import demo_judge_reply
from testing.llm import OpenAIServer

KEY = "sk-osworld-judge"


def _png(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 200), (shade, 255 - shade, 128)).save(out, format="PNG")
    return out.getvalue()


def _result(root: Path, actions: list[str], score: str) -> Path:
    folder = root / "pyautogui" / "screenshot" / "gpt-5" / "os" / "task-7"
    folder.mkdir(parents=True)
    (folder / "step_0.png").write_bytes(_png(0))
    (folder / "instruction.txt").write_text("Create the folder reports")
    lines = []
    for i, action in enumerate(actions, start=1):
        name = f"step_{i}.png"
        (folder / name).write_bytes(_png(40 * i + len(actions)))
        lines.append(json.dumps({"step_num": i, "action": action, "response": "thinking", "screenshot_file": name}))
    (folder / "traj.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "result.txt").write_text(score)
    return root


@pytest.fixture
def judge_url() -> Iterator[str]:
    """The judge's server on a thread of its own (the command runs its own event loop)."""
    with threaded_servers(OpenAIServer(Script("osworld-judge", [demo_judge_reply] * 50), api_key=KEY)) as (url,):
        yield url


def test_import_judge_and_rejudge(tmp_path: Path, judge_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    r1 = _result(tmp_path / "results1", ["pyautogui.click(x=50, y=60)", "DONE"], "1.0")
    r2 = _result(tmp_path / "results2", ["pyautogui.press('enter')", "pyautogui.click(x=5, y=6)"], "0")
    run_dir = tmp_path / "runs" / "imported"
    args = [str(run_dir), "--model", "openai/judge", "--base-url", judge_url, "--seed", "3"]
    first = CliRunner().invoke(app, ["judge", *args, "--import-osworld", str(r1), "--import-osworld", str(r2)])
    assert first.exit_code == 0, first.output
    assert "imported 2 rollouts of 1 tasks" in first.output and "task-7: rollout 0 among [0, 1]" in first.output
    layout = RunLayout(run_dir.parent, run_dir.name)
    task = layout.task("task-7")
    selection, result = task.read_selection(), task.read_result()
    assert selection is not None and selection.chosen == 0 and selection.seed == 3
    assert result is not None and result.scores == {0: 1.0, 1: 0.0} and result.selected_score == 1.0
    narrative_calls = sum(r.module == "narrative" for r in Ledger.read(layout.ledger_path))
    assert narrative_calls == 3  # one per transition; DONE is told without a call
    assert "model calls: 3 narrative, 1 judge" in first.output
    assert layout.report_path.is_file() and "CHOSEN" in layout.report_path.read_text()

    again = CliRunner().invoke(app, ["judge", *args])
    assert again.exit_code == 0, again.output
    assert "model calls: 0 narrative, 1 judge" in again.output


def test_rejudge_with_another_judge_model_reuses_the_narrators_facts(tmp_path: Path, judge_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    r1 = _result(tmp_path / "results1", ["pyautogui.click(x=50, y=60)", "DONE"], "1.0")
    r2 = _result(tmp_path / "results2", ["pyautogui.press('enter')"], "0")
    run_dir = tmp_path / "runs" / "split"
    base = [str(run_dir), "--base-url", judge_url, "--narrator-base-url", judge_url, "--seed", "3"]
    first = CliRunner().invoke(app, ["judge", *base, "--judge-model", "openai/judge-a",
                                     "--narrator-model", "openai/narrator",
                                     "--import-osworld", str(r1), "--import-osworld", str(r2)])
    assert first.exit_code == 0, first.output
    assert "model calls: 2 narrative, 1 judge" in first.output
    assert "narrative model: openai/narrator" in first.output and "judge model: openai/judge-a" in first.output

    again = CliRunner().invoke(app, ["judge", *base, "--judge-model", "openai/judge-b", "--narrator-model",
                                     "openai/narrator"])
    assert again.exit_code == 0, again.output
    assert "model calls: 0 narrative, 1 judge" in again.output and "judge model: openai/judge-b" in again.output

    other = CliRunner().invoke(app, ["judge", *base, "--judge-model", "openai/judge-b", "--narrator-model",
                                     "openai/narrator-2"])
    assert other.exit_code == 0, other.output
    assert "model calls: 2 narrative, 1 judge" in other.output  # a new narrator writes its own facts
    layout = RunLayout(run_dir.parent, run_dir.name)
    selection = layout.task("task-7").read_selection()
    assert selection is not None and selection.model == "openai/judge-b"
    assert layout.task("task-7").read_narrative(0).model == "openai/narrator-2"  # type: ignore[union-attr]
