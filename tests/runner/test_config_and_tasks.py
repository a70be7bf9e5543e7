"""The run configuration, what --task names, the demo policy's role routing, and the task
executor (no desktop needed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.config import ConfigError, dump_config
from core.llm import ChatMessage, GenerateConfig, ScriptRequest
from core.trajectory import Task, TaskResult
from environments.tasks import SUITE_DIR, TaskFileError
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, register_demo, role_of
from runner.strategy import TaskRun, run_tasks
from runner.tasks import resolve_task


def test_layers_apply_in_order_and_secrets_are_redacted(tmp_path: Path) -> None:
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "policy:\n  model: anthropic/claude-sonnet-4-5\n  api_key: sk-very-secret\n"
        "rollout:\n  max_steps: 30\n  settle_seconds: 1.5\n"
        "environment:\n  kind: osworld\n  url: http://10.0.0.5:5000\n  token: tok-secret\n"
    )
    cfg = load_run_config([run_file, "rollout.max_steps=12", "worker.reflection=false",
                           {"rollout": {"cost_limit": 2.5}}])  # fmt: skip
    assert (cfg.policy.model, cfg.rollout.max_steps, cfg.rollout.settle_seconds) == (
        "anthropic/claude-sonnet-4-5", 12, 1.5,
    )
    assert cfg.rollout.cost_limit == 2.5 and cfg.worker.reflection is False
    dumped = json.dumps(dump_config(cfg))
    assert "sk-very-secret" not in dumped and "tok-secret" not in dumped
    assert json.loads(dumped)["environment"]["url"] == "http://10.0.0.5:5000"
    assert load_run_config([]).rollout.settle_seconds == 3.0


def test_an_unknown_key_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(["rollout.max_step=3"])
    assert "rollout.max_step" in str(err.value) and "max_steps" in str(err.value)


def test_task_from_a_file_and_from_the_suite_are_the_same_task() -> None:
    path = SUITE_DIR / "examples" / "mousepad" / "mousepad-append-line.json"
    by_path, by_id = resolve_task(str(path)), resolve_task("mousepad-append-line")
    assert by_path.model_dump() == by_id.model_dump() and by_path.evaluator and by_path.source_path == str(path)
    assert by_id.domain == "mousepad"  # where it was listed: not part of the record
    with pytest.raises(TaskFileError, match="no such task file"):
        resolve_task("missing/task.json")


def test_the_demo_policy_answers_each_role_from_its_plan() -> None:
    plan = DEMO_PLANS["terminal-rename-extension"]

    def ask(system: str, user: str, assistants: int = 0) -> str:
        messages = [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]
        messages += [ChatMessage(role="assistant", content="x")] * assistants
        return plan(ScriptRequest(messages, GenerateConfig(), "test"))

    assert "call_code_agent" in ask("You operate a computer running Ubuntu", "Task: t\nStep 1.\n")
    assert "agent.type" in ask("You operate a computer running Ubuntu", "Task: t\nStep 2.\n")
    assert "agent.fail()" in ask("You operate a computer running Ubuntu", "Task: t\nStep 9.\n")
    assert ask("You review the progress of an agent", "...").startswith("ON-TRACK")
    assert "```bash" in ask("You write and run code on a computer", "Task: t", assistants=0)
    assert "DONE" in ask("You write and run code on a computer", "Task: t", assistants=1)
    assert ask("You locate elements on screenshots", "The screenshot is 1280x720 pixels") == "(640, 360)"
    assert role_of([ChatMessage(role="user", content="Query: the OK button")]) == "grounding"
    with pytest.raises(KeyError, match="no plan for task"):
        register_demo("calc-sum-total")


async def test_the_executor_bounds_concurrency_and_isolates_failures() -> None:
    tasks = [Task(id=f"t{i}", instruction="x") for i in range(5)]
    running, peak = 0, 0

    class Probe:
        name = "probe"

        async def __call__(self, run: TaskRun) -> TaskResult:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.05)
            running -= 1
            if run.task.id == "t2":
                raise RuntimeError("boom")
            return TaskResult.from_scores(run.task.id, {0: 1.0}, selected=0)

    def make_run(task: Task) -> TaskRun:
        return TaskRun(task=task, layout=None, config=None, pool=None, models=None, ledger=None)  # type: ignore[arg-type]

    seen: list[str] = []

    async def on_result(task: Task, out: TaskResult | BaseException) -> None:
        seen.append(task.id)

    results = await run_tasks(tasks, Probe(), make_run, concurrency=2, on_result=on_result)
    assert peak == 2
    assert isinstance(results[2], RuntimeError)
    assert [r.task_id for r in results if isinstance(r, TaskResult)] == ["t0", "t1", "t3", "t4"]
    assert sorted(seen) == [t.id for t in tasks]
