"""A task whose setup fails or whose scorer crashes is an error of its own, never a score:
`run_rollout` records ``setup_failed`` / ``scoring_failed`` with one line naming the task,
step and cause (a bug's traceback goes to the log, not the terminal), and the task's result
says it errored. The environment here is a stand-in at the interface (no desktop): the
outcome is decided by the runner from what `prepare_task` / `score_task` raise."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import numpy as np
import pytest

from core.llm import Ledger
from core.png import encode_png
from core.protocols import EnvError, Environment, EnvironmentLost, ExecResult, Sandbox
from core.trajectory import RunLayout, Task
from environments.tasks import TaskRunError
from runner.config import load_run_config
from runner.environments import FixedPool
from runner.models import build_models
from runner.noop_policy import register_noop
from runner.outcomes import task_failure
from runner.strategy import SingleRollout, TaskRun

_PNG = encode_png(np.full((60, 80, 3), 200, dtype=np.uint8))
TASK = Task(id="t-1", instruction="Do the thing.", config=[{"type": "sleep", "parameters": {"seconds": 0}}],
            evaluator={"func": "exact_match", "result": {"type": "rule", "rules": {}}})


class _Stage(Environment):
    """Answers a rollout with a blank screen; `prepare_task` / `score_task` do what it is told."""

    name = "stage-1"
    platform = "ubuntu"

    def __init__(self, *, setup: BaseException | None = None, score: BaseException | float | None = 0.0) -> None:
        self.setup, self.score = setup, score
        self.acted: list[str] = []

    async def screenshot(self) -> bytes:
        return _PNG

    async def screen_size(self) -> tuple[int, int]:
        return (80, 60)

    async def cursor_position(self) -> tuple[int, int]:
        return (0, 0)

    async def act(self, code: str) -> ExecResult:
        self.acted.append(code)
        return ExecResult("ok", 0)

    def sandbox(self) -> Sandbox | None:
        return None

    async def revert(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        if self.setup is not None:
            raise self.setup

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        if isinstance(self.score, BaseException):
            raise self.score
        return self.score


def _run(tmp_path: Path, env: Environment) -> tuple[RunLayout, Ledger, SingleRollout]:
    register_noop("scripted/noop")
    cfg = load_run_config([{"policy": {"model": "scripted/noop"}, "rollout": {"settle_seconds": 0}}])
    layout = RunLayout(tmp_path, "r", durable=False)
    ledger = Ledger(layout.ledger_path)
    models = build_models(cfg, ledger)
    strategy = SingleRollout()
    run = TaskRun(task=TASK, layout=layout, config=cfg, pool=FixedPool(env), models=models, ledger=ledger)

    async def go() -> None:
        try:
            await strategy(run)
        finally:
            await models.aclose()

    asyncio.run(go())
    return layout, ledger, strategy


def test_a_failed_setup_step_is_setup_failed_and_no_model_is_called(tmp_path: Path) -> None:
    why = "task t-1: setup step 0 (execute) failed: [Errno 2] No such file or directory: 'python'"
    layout, ledger, strategy = _run(tmp_path, _Stage(setup=TaskRunError(why)))
    header = layout.rollout("t-1", 0).read_info()
    assert header is not None and (header.status, header.reason, header.score) == ("setup_failed", why, None)
    result = layout.task("t-1").read_result()
    assert result is not None and result.errored and result.pass_at_n is None
    assert result.errors[0].outcome == "setup_failed" and result.errors[0].reason == why
    assert strategy.outcomes["t-1"].score is None and strategy.outcomes["t-1"].score_error == why
    assert len(ledger.records) == 0  # the agent never started


def test_a_bug_in_setup_is_one_line_and_its_traceback_goes_to_the_log(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="runner.strategy")
    layout, _, _ = _run(tmp_path, _Stage(setup=KeyError("path")))
    header = layout.rollout("t-1", 0).read_info()
    assert header is not None and header.status == "setup_failed"
    assert header.reason == "task t-1: setup failed: KeyError: 'path'"
    logged = [r for r in caplog.records if r.name == "runner.strategy"]
    assert logged and logged[0].levelno == logging.INFO and logged[0].exc_info is not None


def test_a_crashing_scorer_is_scoring_failed_and_keeps_how_the_agent_ended(tmp_path: Path) -> None:
    layout, ledger, strategy = _run(tmp_path, _Stage(score=TypeError("'NoneType' object is not subscriptable")))
    header = layout.rollout("t-1", 0).read_info()
    why = "task t-1: scoring failed: TypeError: 'NoneType' object is not subscriptable"
    assert header is not None and header.score is None and header.score_error == why
    assert (header.status, header.reason) == ("done", "the agent declared the task complete")  # what a judge sees
    assert header.step_count == 1 and header.ended_at is not None
    result = layout.task("t-1").read_result()
    assert result is not None and result.selected_score is None
    assert result.errors[0].outcome == "scoring_failed" and result.errors[0].reason == why
    outcome = strategy.outcomes["t-1"]
    assert outcome.shown_status == "scoring_failed" and outcome.result.status == "done"
    assert [r.module for r in ledger.records] == ["policy"]


def test_an_environment_lost_while_scoring_is_lost_not_a_task_error(tmp_path: Path) -> None:
    layout, _, _ = _run(tmp_path, _Stage(score=EnvironmentLost("the desktop's server is gone")))
    header = layout.rollout("t-1", 0).read_info()
    assert header is not None and header.status == "environment_lost"
    result = layout.task("t-1").read_result()
    assert result is not None and not result.errored and result.scores == {0: None}


def test_a_scored_task_is_not_errored(tmp_path: Path) -> None:
    layout, _, _ = _run(tmp_path, _Stage(score=1.0))
    result = layout.task("t-1").read_result()
    header = layout.rollout("t-1", 0).read_info()
    assert result is not None and not result.errored and result.selected_score == 1.0 and result.pass_at_n == 1.0
    assert header is not None and (header.status, header.score) == ("done", 1.0)


def test_failure_lines_name_the_task_once_and_hide_url_secrets() -> None:
    own = TaskRunError("task t-1: postconfig step 0 (execute) failed: exit 1")
    assert task_failure("t-1", "scoring", own) == "task t-1: postconfig step 0 (execute) failed: exit 1"
    assert task_failure("t-1", "setup", EnvError("the door\nis shut")) == "task t-1: setup failed: the door is shut"
    leaked = ValueError("GET http://user:hunter2@10.0.0.5:5000/x failed")
    line = task_failure("t-1", "scoring", leaked)
    assert "hunter2" not in line and line.startswith("task t-1: scoring failed: ValueError: GET http://")
    assert len(task_failure("t-1", "setup", RuntimeError("x" * 5000))) == 600
