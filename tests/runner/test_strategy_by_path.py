"""A strategy written outside the project, named by dotted path, is driven by the runner.

The runner asks a strategy's class what it needs (`runner.strategy.BaseStrategy`: rollouts
per task, environments at once, model roles, its checks, how it resumes) and never compares
its name: ``run --strategy my_strategies:TwoTries`` and ``bench osworld --strategy ...`` run
a class that lives in a temporary folder on ``sys.path``, and a scan of the runner's source
finds no comparison with a strategy's name, so none can be special-cased there again.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import flatten, module_elsewhere
from test_environment_kinds import OPENED, Paper, paper_kind  # noqa: F401  (a fixture: an in-memory environment kind)
from typer.testing import CliRunner

from core.llm import Script
from core.registry import UnknownName
from core.trajectory import RunLayout
from runner.bench import rollouts_per_task
from runner.cli import app
from runner.cli.models import planned_uses
from runner.config import load_run_config
from runner.demo_policy import PlannedReplies, action_reply
from runner.pricing import run_model_names
from runner.strategies import STRATEGIES
from runner.strategy import BaseStrategy, check_strategy, strategy_class

SRC = Path(__file__).resolve().parents[2] / "src"

#: What a user writes to add a strategy of their own: a module of their own.
MINE = '''
"""Two rollouts one after the other; the task's score is the better one."""

from __future__ import annotations

import asyncio
from typing import Any

from core.trajectory import TaskResult
from runner.strategy import BaseStrategy, TaskRun, run_rollout, task_errors


class TwoTries(BaseStrategy):
    name = "two-tries"
    roles = ("critic",)  # priced and checked as a critic would be (it calls none: a test of the question)

    @classmethod
    def rollouts(cls, cfg: Any) -> int:
        return 2

    @classmethod
    def check(cls, cfg: Any) -> None:
        if cfg.rollout.max_steps < 2:
            raise ValueError("two-tries needs rollout.max_steps >= 2")

    def __init__(self) -> None:
        self.outcomes: dict[str, Any] = {}

    async def __call__(self, run: TaskRun) -> TaskResult:
        await asyncio.to_thread(run.task_dir.write_task, run.task)
        found = []
        for k in range(2):
            env = await run.pool.acquire()
            try:
                found.append(await run_rollout(run, k, env, seed=k))
            finally:
                run.pool.release(env)
        best = max(found, key=lambda o: (o.score or 0.0, o.index))
        self.outcomes[run.task.id] = best
        result = TaskResult.from_scores(run.task.id, {o.index: o.score for o in found}, selected=best.index,
                                        errors=task_errors(found))
        await asyncio.to_thread(run.task_dir.write_result, result)
        return result


class NotOne:
    name = "not-one"

    async def __call__(self, run: Any) -> None:
        return None
'''

PATH = "my_strategies:TwoTries"


@pytest.fixture
def mine(tmp_path: Path) -> Iterator[Path]:
    # a class named by path is registered under its name: unregistered afterwards
    with module_elsewhere(tmp_path / "elsewhere", "my_strategies", MINE, (STRATEGIES, "two-tries")) as folder:
        yield folder


def _policy(name: str) -> None:
    Script(name, [PlannedReplies(plan=[action_reply("I press Enter.", 'agent.hotkey(["enter"])'),
                                       action_reply("Done.", "agent.done()")])] * 40)


def test_the_runner_asks_the_strategy_not_its_name(mine: Path) -> None:
    cfg = load_run_config([{"strategy": PATH, "policy": {"model": "scripted/x"},
                            "critic": {"model": {"model": "openai/gpt-5"}}}])
    chosen = strategy_class(cfg)
    assert issubclass(chosen, BaseStrategy) and chosen.name == "two-tries"
    assert rollouts_per_task(cfg) == 2 and chosen.width(cfg) == 1
    assert "openai/gpt-5" in run_model_names(cfg)  # its role's model is priced
    assert any(use.role.startswith("critic") for use in planned_uses(cfg))  # and checked
    with pytest.raises(ValueError, match=r"two-tries needs rollout\.max_steps >= 2"):
        check_strategy(load_run_config([{"strategy": PATH, "rollout": {"max_steps": 1}}]))
    with pytest.raises(ValueError, match="need --strategy branch"):  # a section another strategy owns
        check_strategy(load_run_config([{"strategy": PATH, "branch": {"at": 2}}]))


def test_a_class_that_answers_nothing_is_refused_in_one_line(mine: Path) -> None:
    with pytest.raises(UnknownName, match=r"not a strategy: it does not answer roles.*subclass runner\.strategy\.BaseStrategy"):
        STRATEGIES.get("my_strategies:NotOne")
    result = CliRunner().invoke(app, ["run", "--strategy", "my_strategies:NotOne", "--task", "x y",
                                      "--model", "scripted/demo"], env={"COLUMNS": "400"})
    assert result.exit_code != 0 and "subclass runner.strategy.BaseStrategy" in flatten(result.output)


def test_a_strategy_by_dotted_path_runs_through_run(paper_kind: object, mine: Path, tmp_path: Path) -> None:  # noqa: F811
    _policy("paper-two")
    result = CliRunner().invoke(app, [
        "run", "--env", "paper", "--task", "Press Enter once", "--model", "scripted/paper-two", "--strategy", PATH,
        "--out", str(tmp_path / "runs"), "--run-id", "two",
    ], env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 0, result.output
    layout = RunLayout(tmp_path / "runs", "two")
    task = next(p for p in layout.path.iterdir() if p.is_dir() and (p / "rollout-0").is_dir())
    assert (task / "rollout-1").is_dir() and not (task / "rollout-2").exists()
    assert json.loads((task / "result.json").read_text())["selected"] == 1
    assert json.loads((layout.path / "config.json").read_text())["strategy"] == PATH


def test_a_strategy_by_dotted_path_runs_and_resumes_through_bench(paper_kind: object, mine: Path,  # noqa: F811
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    async def scored(self: Paper, task: object, cache: Path, *, last_action: str | None) -> float:
        return 1.0 if self.actions else 0.0

    async def prepared(self: Paper, task: object, cache: Path) -> None:
        await self.revert()

    monkeypatch.setattr(Paper, "prepare_task", prepared)  # paper runs the task's steps by doing nothing
    monkeypatch.setattr(Paper, "score_task", scored)
    _policy("paper-bench")
    examples = tmp_path / "list" / "examples" / "paper"
    examples.mkdir(parents=True)
    (examples / "t1.json").write_text(json.dumps({"id": "t1", "instruction": "Press Enter once", "config": [],
                                                  "evaluator": {"func": "infeasible"}}))
    (tmp_path / "list" / "test.json").write_text(json.dumps({"paper": ["t1"]}))
    args = ["bench", "osworld", "--tasks", str(tmp_path / "list" / "test.json"), "--env", "paper",
            "--model", "scripted/paper-bench", "--strategy", PATH, "--out", str(tmp_path / "runs"),
            "--run-id", "b"]
    OPENED.clear()
    first = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert first.exit_code == 0, first.output
    task = RunLayout(tmp_path / "runs", "b").task("t1").path
    assert (task / "rollout-0").is_dir() and (task / "rollout-1").is_dir()
    assert OPENED and OPENED[0][1].size == 1  # its width: one environment per task at once
    result = json.loads((task / "result.json").read_text())
    assert result["scores"] == {"0": 1.0, "1": 1.0} and result["selected"] == 1
    again = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert again.exit_code == 0, again.output
    assert len(OPENED) == 1  # its two rollouts were kept: nothing to run, no environment opened


def test_the_runner_never_compares_a_strategy_name() -> None:
    """``cfg.strategy == "wide"`` and the like were questions the strategy now answers."""
    found = []
    for path in sorted((SRC / "runner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = any((isinstance(s, ast.Attribute) and s.attr == "strategy") or
                            (isinstance(s, ast.Name) and s.id == "strategy") for s in sides)
                literal = any((isinstance(s, ast.Constant) and s.value in STRATEGIES.names()) or
                              (isinstance(s, ast.Tuple) and any(isinstance(e, ast.Constant) and e.value in STRATEGIES.names()
                                                               for e in s.elts)) for s in sides)
                if named and literal:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found
