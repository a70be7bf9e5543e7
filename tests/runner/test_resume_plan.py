"""What a resumed benchmark keeps and redoes, from headers alone, and when it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.trajectory import RolloutInfo, RunLayout, Task
from reference_data import OSWORLD_TASKS as OSWORLD
from reference_data import requires_osworld_tasks
from runner.bench import load_bench_tasks
from runner.resume import (
    BenchManifest,
    ResumeMismatch,
    check_resume,
    identity_of,
    pending_rollouts,
    write_manifest,
)


def _header(layout: RunLayout, k: int, status: str, score: float | None) -> None:
    layout.rollout("t", k).write_info(RolloutInfo(run_id="r", task_id="t", rollout=k, model="openai/x",
                                                  status=status, started_at=1.0, score=score))  # type: ignore[arg-type]


def test_pending_rollouts(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r", durable=False)
    scored = Task(id="t", instruction="x", evaluator={"func": "exact_match"})
    _header(layout, 0, "done", 1.0)  # kept
    _header(layout, 1, "running", None)  # the run died under it
    _header(layout, 2, "failed", None)  # ended, but killed before its evaluation
    _header(layout, 3, "environment_lost", None)  # the world ended it
    _header(layout, 4, "step_limit", 0.0)  # kept
    # rollout 5 never started
    assert pending_rollouts(layout, scored, 6) == [1, 2, 3, 5]
    unscored = Task(id="t", instruction="x")  # no evaluator: an unscored end is final
    assert pending_rollouts(layout, unscored, 6) == [1, 3, 5]


def test_identity_ignores_how_models_are_reached(tmp_path: Path) -> None:
    a = identity_of({"policy": {"model": "openai/x", "base_url": "http://127.0.0.1:1", "api_key": "s"},
                     "run_id": "r", "out_dir": "a"}, tasks="l.json")
    b = identity_of({"policy": {"model": "openai/x", "base_url": "http://127.0.0.1:2"}, "run_id": "r",
                     "out_dir": "b"}, tasks="l.json")
    assert a == b


def test_mismatch_names_the_change(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r", durable=False)
    old = identity_of({"wide": {"rollouts": 2}, "policy": {"model": "openai/x"}}, tasks="l.json")
    assert check_resume(layout, "local", old) is None  # a new run
    write_manifest(layout, BenchManifest(suite="local", identity=old, seed=3))
    manifest = check_resume(layout, "local", old)
    assert manifest is not None and manifest.seed == 3
    new = identity_of({"wide": {"rollouts": 4}, "policy": {"model": "openai/x"}}, tasks="l.json")
    with pytest.raises(ResumeMismatch, match=r"config\.wide\.rollouts \(was 2, now 4\)"):
        check_resume(layout, "local", new)
    foreign = RunLayout(tmp_path, "other", durable=False)
    foreign.task("t").write_task(Task(id="t", instruction="x"))
    with pytest.raises(ResumeMismatch, match="not a benchmark run"):
        check_resume(foreign, "local", old)


@requires_osworld_tasks
def test_osworld_list_skips_unsupported_tasks() -> None:
    every = load_bench_tasks(OSWORLD / "test_nogdrive.json", OSWORLD / "examples")
    assert every.tasks and every.skipped
    assert not set(every.domains) & set(every.skipped)
    assert all(gaps for gaps in every.skipped.values())
    some = load_bench_tasks(OSWORLD / "test_nogdrive.json", OSWORLD / "examples", domain="os", limit=3)
    assert len(some.tasks) == 3 and set(some.domains.values()) == {"os"}
