"""The run layout on disk: paths, writes, reads, and the rules appends keep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.trajectory import (
    Narrative,
    RolloutDir,
    RunLayout,
    Selection,
    Task,
    TaskResult,
)


def test_paths_follow_the_documented_layout(layout: RunLayout) -> None:
    root = layout.path
    assert root.name == "run-1"
    assert layout.config_path == root / "config.json"
    assert layout.ledger_path == root / "ledger.jsonl"
    assert layout.report_path == root / "report.html"
    rd = layout.rollout("task-a", 3)
    assert rd.path == root / "task-a" / "rollout-3"
    assert rd.traj_path == rd.path / "traj.jsonl" and rd.info_path == rd.path / "rollout.json"
    assert not root.exists(), "computing paths must not create folders"


@pytest.mark.parametrize("bad", ["", "..", "../x", "a/b", ".hidden", "-flag", "a..b", "x" * 201])
def test_ids_that_are_not_one_folder_name_are_refused(layout: RunLayout, bad: str) -> None:
    with pytest.raises(ValueError, match="cannot name a folder"):
        layout.task(bad)


def test_a_rollout_written_and_read_back(layout: RunLayout, make: Any) -> None:
    rd = layout.rollout("task-a", 0)
    rd.start(make.info("task-a", 0, seed=5))
    stored = [
        rd.append_step(
            make.step(i), screenshots={"before": make.png(i, "before"), "after": make.png(i, "after")}
        )
        for i in range(3)
    ]
    assert stored[1].before_screenshot == "step-0001-before.png"
    assert stored[1].after_screenshot == "step-0001-after.png"
    assert sorted(p.name for p in rd.path.iterdir()) == [
        "rollout.json",
        *[f"step-000{i}-{r}.png" for i in range(3) for r in ("after", "before")],
        "traj.jsonl",
    ]
    finished = rd.finish("done", "the agent said DONE", score=1.0)
    assert (finished.status, finished.step_count, finished.score) == ("done", 3, 1.0)
    assert finished.ended_at is not None and finished.ended_at >= finished.started_at

    trajectory = rd.read()
    assert trajectory.info == finished and trajectory.steps == stored
    assert rd.read_step(2) == stored[2]
    assert rd.read_screenshot(stored[2], "after") == make.png(2, "after")
    # The files are readable without the program.
    lines = rd.traj_path.read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2]
    assert json.loads(rd.info_path.read_text())["status"] == "done"


def test_steps_must_come_in_order_and_name_existing_files(layout: RunLayout, make: Any) -> None:
    rd = layout.rollout("task-a", 0)
    rd.start(make.info("task-a", 0))
    with pytest.raises(ValueError, match="the next step is 0, not 1"):
        rd.append_step(make.step(1))
    rd.append_step(make.step(0))
    with pytest.raises(ValueError, match="the next step is 1, not 0"):
        rd.append_step(make.step(0))
    with pytest.raises(FileNotFoundError, match=r"step-0009-after\.png"):
        rd.append_step(make.step(1, after_screenshot="step-0009-after.png"))
    with pytest.raises(ValueError, match="screenshot role 'zoom'"):
        rd.append_step(make.step(1), screenshots={"zoom": b"x"})
    assert rd.step_count() == 1
    # A second writer object on the same folder continues where the log ends.
    assert layout.rollout("task-a", 0).append_step(make.step(1)).index == 1


def test_header_must_match_its_folder(layout: RunLayout, make: Any) -> None:
    with pytest.raises(ValueError, match="does not belong"):
        layout.rollout("task-a", 0).write_info(make.info("task-a", 1))
    with pytest.raises(ValueError, match="terminal status"):
        layout.rollout("task-a", 0).finish("running")
    with pytest.raises(FileNotFoundError, match="start the rollout"):
        layout.rollout("task-a", 0).finish("done")


def test_start_again_drops_the_old_attempt(layout: RunLayout, make: Any) -> None:
    rd = layout.rollout("task-a", 1)
    rd.start(make.info("task-a", 1))
    for i in range(2):
        rd.append_step(make.step(i), screenshots={"before": make.png(i, "before")})
    rd.finish("errored", "VM vanished")

    info = rd.start(make.info("task-a", 1, status="done", step_count=9))
    assert (info.status, info.attempts, info.step_count) == ("running", 2, 0)
    assert rd.step_count() == 0 and list(rd.path.glob("*.png")) == []
    assert rd.append_step(make.step(0)).index == 0


def test_task_level_records(layout: RunLayout) -> None:
    task_dir = layout.task("task-a")
    assert task_dir.read_task() is None and task_dir.read_selection() is None
    task = Task(id="task-a", instruction="Save the file.")
    narrative = Narrative(rollout=2, initial_state="start", facts=[["a"]], final_state="end")
    selection = Selection(strategy="bjudge_mcq", candidates=[0, 2], chosen=2)
    result = TaskResult.from_scores("task-a", {0: 0.0, 2: 1.0}, selected=2)
    task_dir.write_task(task)
    task_dir.write_narrative(narrative)
    task_dir.write_selection(selection)
    task_dir.write_result(result)
    assert (task_dir.path / "narratives" / "rollout-2.json").is_file()
    assert task_dir.read_task() == task
    assert task_dir.read_narrative(2) == narrative and task_dir.read_narrative(0) is None
    assert task_dir.read_selection() == selection
    assert task_dir.read_result() == result
    with pytest.raises(ValueError, match="does not belong"):
        task_dir.write_task(Task(id="task-b", instruction="x"))
    assert layout.task_ids() == ["task-a"]


def test_run_root_files(layout: RunLayout) -> None:
    assert layout.read_config() is None
    layout.write_config({"rollouts": 3, "judge": {"model": "m"}})
    assert layout.read_config() == {"rollouts": 3, "judge": {"model": "m"}}
    layout.write_report("<html>ok</html>")
    assert layout.report_path.read_text() == "<html>ok</html>"


def test_listing_finds_tasks_and_rollouts(layout: RunLayout, make: Any, tmp_path: Path) -> None:
    layout.rollout("t2", 1).start(make.info("t2", 1))
    layout.rollout("t1", 0).start(make.info("t1", 0))
    layout.rollout("t1", 10).start(make.info("t1", 10))
    layout.rollout("t1", 2).path.mkdir(parents=True)  # a folder whose header never landed
    (layout.path / "notes").mkdir()  # not a task: no task.json, no rollout folder
    assert layout.task_ids() == ["t1", "t2"]
    headers = layout.headers()
    assert list(headers["t1"]) == [0, 2, 10] and headers["t1"][2] is None
    assert headers["t2"][1] is not None and headers["t2"][1].rollout == 1
    assert RunLayout(tmp_path / "nowhere", "r").headers() == {}


def test_remove_temporaries_of_a_killed_run(layout: RunLayout, make: Any) -> None:
    rd: RolloutDir = layout.rollout("t1", 0)
    rd.start(make.info("t1", 0))
    (rd.path / ".rollout.json.k3j4h5g6.tmp").write_text("{")
    assert layout.remove_temporaries() == 1
    assert rd.read_info() is not None
