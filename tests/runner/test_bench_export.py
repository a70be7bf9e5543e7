"""The OSWorld export of a hand-made run: the selected rollout in OSWorld's results layout
(traj.jsonl, step_0.png, step_<n>.png, result.txt), read back by bjudge's OSWorld import
with the same steps, actions, ending and score; the bench command's one-line errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from bjudge import import_osworld
from core.trajectory import RolloutInfo, RunLayout, Step, Task, TaskResult
from runner.cli import app
from runner.osworld_export import export_osworld


def _png(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 40), (shade, 20, 200 - shade)).save(out, format="PNG")
    return out.getvalue()


def _run(root: Path) -> RunLayout:
    layout = RunLayout(root, "made", durable=False)
    task_dir = layout.task("task-a")
    task_dir.write_task(Task(id="task-a", instruction="Rename the file", snapshot="os"))
    for k, score in ((0, 0.0), (1, 1.0)):
        rd = task_dir.rollout(k)
        rd.start(RolloutInfo(run_id="made", task_id="task-a", rollout=k, model="openai/gpt-5", started_at=1.0))
        rd.append_step(Step(index=0, thought="click it", action={"kind": "click"}, code="pyautogui.click(10, 20)"),
                       {"before": _png(10 * k), "after": _png(10 * k + 1)})
        rd.append_step(Step(index=1, thought="type", action={"kind": "type", "text": "b"},
                            code="pyautogui.write('b')", before_screenshot="step-0000-after.png"),
                       {"after": _png(10 * k + 2)})
        rd.append_step(Step(index=2, thought="finished", action={"kind": "done"}))  # no screenshot
        rd.finish("done", score=score)
    task_dir.write_result(TaskResult.from_scores("task-a", {0: 0.0, 1: 1.0}, selected=1))
    unfinished = layout.task("task-b")
    unfinished.write_task(Task(id="task-b", instruction="x"))
    return layout


def test_export_layout_round_trips(tmp_path: Path) -> None:
    layout = _run(tmp_path / "runs")
    report = export_osworld(layout, tmp_path / "results", domains={"task-a": "os"})
    folder = tmp_path / "results" / "pyautogui" / "screenshot" / "gpt-5" / "os" / "task-a"
    assert report.written == {"task-a": folder} and "task-b" in report.skipped
    assert sorted(p.name for p in folder.iterdir()) == [
        "instruction.txt", "result.txt", "step_0.png", "step_1.png", "step_2.png", "step_3.png", "traj.jsonl"]
    lines = [json.loads(x) for x in (folder / "traj.jsonl").read_text().splitlines()]
    assert [x["action"] for x in lines] == ["pyautogui.click(10, 20)", "pyautogui.write('b')", "DONE"]
    assert (folder / "step_1.png").read_bytes() == _png(11)  # the selected rollout's screens
    assert (folder / "step_3.png").read_bytes() == (folder / "step_2.png").read_bytes()
    assert float((folder / "result.txt").read_text()) == 1.0

    back = RunLayout(tmp_path / "back", "imported", durable=False)
    imported = import_osworld([tmp_path / "results"], back)
    assert imported.rollouts == {"task-a": [0]} and not imported.skipped
    copy, original = back.rollout("task-a", 0).read(), layout.rollout("task-a", 1).read()
    assert (copy.info.status, copy.info.score) == (original.info.status, 1.0)
    assert [s.code for s in copy.steps[:2]] == [s.code for s in original.steps[:2]]
    assert copy.steps[2].action == {"kind": "done"}
    assert back.rollout("task-a", 0).read_screenshot(copy.steps[0], "before") == _png(10)
    assert back.task("task-a").read_task().instruction == "Rename the file"  # type: ignore[union-attr]


def test_bench_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    no_id = runner.invoke(app, ["bench", "local", "--model", "openai/x", "--out", str(tmp_path)])
    assert no_id.exit_code == 2 and "needs --run-id" in no_id.output
    none = runner.invoke(app, ["bench", "local", "--domain", "nowhere", "--run-id", "r", "--out", str(tmp_path)])
    assert none.exit_code == 2 and "no runnable task" in none.output and "nowhere" in none.output
    missing = runner.invoke(app, ["bench", "osworld", "--tasks", str(tmp_path / "none.json"), "--run-id", "r"])
    assert missing.exit_code == 2 and "cannot read the task list" in missing.output
