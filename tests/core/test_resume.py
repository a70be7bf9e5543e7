"""What a resumed run redoes: decided from headers, never repeating a finished rollout."""

from __future__ import annotations

from typing import Any

import pytest

from core.trajectory import RolloutDir, RunLayout, plan_resume


@pytest.fixture
def crashed_run(layout: RunLayout, make: Any) -> RunLayout:
    """t1: 0 done, 1 killed mid-way, 2 errored, 3 never started, 4 failed (agent gave up);
    t2: 0 format_error, 1 environment_lost. t3 not started at all."""
    statuses = {("t1", 0): "done", ("t1", 2): "errored", ("t1", 4): "failed", ("t2", 0): "format_error"}
    statuses[("t2", 1)] = "environment_lost"
    for (task_id, k), status in statuses.items():
        rd = layout.rollout(task_id, k)
        rd.start(make.info(task_id, k))
        rd.append_step(make.step(0))
        rd.finish(status)
    killed = layout.rollout("t1", 1)
    killed.start(make.info("t1", 1))
    killed.append_step(make.step(0))
    return layout


def test_plan_keeps_finished_and_redoes_the_rest(crashed_run: RunLayout, parsed: list[str]) -> None:
    plans = plan_resume(crashed_run, ["t1", "t2", "t3"], 5)
    assert (plans["t1"].finished, plans["t1"].redo) == ([0, 2, 4], [1, 3])
    assert (plans["t2"].finished, plans["t2"].redo) == ([0, 1], [2, 3, 4])
    assert (plans["t3"].finished, plans["t3"].redo) == ([], [0, 1, 2, 3, 4])
    assert not any(p.complete for p in plans.values())
    assert parsed == [], "planning must read headers only"


def test_world_failures_can_be_redone(crashed_run: RunLayout) -> None:
    plans = plan_resume(crashed_run, ["t1", "t2"], 2, redo_world_failures=True)
    assert (plans["t1"].finished, plans["t1"].redo) == ([0], [1])
    assert (plans["t2"].finished, plans["t2"].redo) == ([0], [1])
    assert plan_resume(crashed_run, ["t1"], 1)["t1"].complete


def test_redoing_a_rollout_leaves_finished_ones_untouched(crashed_run: RunLayout, make: Any) -> None:
    done: RolloutDir = crashed_run.rollout("t1", 0)
    before = (done.info_path.read_bytes(), done.traj_path.read_bytes())
    for k in plan_resume(crashed_run, ["t1"], 5)["t1"].redo:
        rd = crashed_run.rollout("t1", k)
        info = rd.start(make.info("t1", k))
        rd.append_step(make.step(0))
        rd.finish("done")
        assert info.attempts == (2 if k == 1 else 1)
    assert (done.info_path.read_bytes(), done.traj_path.read_bytes()) == before
    assert plan_resume(crashed_run, ["t1"], 5)["t1"].complete
    assert crashed_run.rollout("t1", 1).step_count() == 1


def test_negative_rollout_count_is_refused(layout: RunLayout) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        plan_resume(layout, ["t1"], -1)
