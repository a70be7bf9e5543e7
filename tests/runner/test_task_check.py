"""`check_tasks` through the Environment interface alone: each task is set up and scored
untouched, failures become one-line outcomes, a score of 1 untouched is flagged, a lost
environment is tried again once, concurrency is bounded. And the do-nothing policies answer
``agent.done()`` / ``agent.fail()`` at once for any task."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.llm import ChatMessage, GenerateConfig, Script, ScriptRequest
from core.protocols import Environment, EnvironmentLost, ExecResult, Sandbox
from core.trajectory import Task
from environments.tasks import TaskRunError
from runner.environments import FixedPool
from runner.noop_policy import NOOP_MODELS, register_noop
from runner.task_check import check_tasks, summarize_checks

METRIC = {"func": "exact_match", "result": {"type": "rule", "rules": {}}}


def _task(task_id: str, evaluator: dict[str, object] | None = None) -> Task:
    return Task(id=task_id, instruction=f"do {task_id}", evaluator=METRIC if evaluator is None else evaluator)


class _Checked(Environment):
    """Sets up and scores by a table of task id → what to do; counts overlapping checks."""

    platform = "ubuntu"
    busy = 0
    most = 0

    def __init__(self, name: str, plan: dict[str, object], lost: set[str]) -> None:
        self.name, self.plan = name, plan
        self.lost_once = lost  # shared: the task is lost once, whichever environment it gets

    async def screenshot(self) -> bytes:
        raise AssertionError("a check never looks at the screen")

    async def screen_size(self) -> tuple[int, int]:
        return (1, 1)

    async def cursor_position(self) -> tuple[int, int]:
        return (0, 0)

    async def act(self, code: str) -> ExecResult:
        raise AssertionError("a check never acts")

    def sandbox(self) -> Sandbox | None:
        return None

    async def revert(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        _Checked.busy += 1
        _Checked.most = max(_Checked.most, _Checked.busy)
        try:
            await asyncio.sleep(0.01)
            todo = self.plan.get(task.id)
            if todo == "setup":
                raise TaskRunError(f"task {task.id}: setup step 1 (launch) failed: no such program 'gimp'")
            if todo == "lost-once" and task.id not in self.lost_once:
                self.lost_once.add(task.id)
                raise EnvironmentLost("the X server died")
        finally:
            _Checked.busy -= 1

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        assert last_action is None  # untouched: no agent ended it
        todo = self.plan.get(task.id)
        if todo == "crash":
            raise TypeError("'NoneType' object is not subscriptable")
        if not task.evaluator:
            return None
        return 1.0 if todo == "one" else 0.0


def test_each_task_gets_one_outcome(tmp_path: Path) -> None:
    plan = {"b": "setup", "c": "crash", "d": "one", "f": "lost-once"}
    lost: set[str] = set()
    envs = [_Checked("e-1", plan, lost), _Checked("e-2", plan, lost)]
    tasks = [(_task("a"), "os"), (_task("b"), "gimp"), (_task("c"), "os"), (_task("d"), "os"),
             (_task("e", evaluator={}), "os"), (_task("f"), "vlc"), (_task("g", {"func": "infeasible"}), "os")]
    seen: list[str] = []

    async def landed(check: object) -> None:
        seen.append(check.task_id)  # type: ignore[attr-defined]

    _Checked.most = 0
    checks = asyncio.run(check_tasks(tasks, FixedPool(*envs), tmp_path, concurrency=2, on_check=landed))
    by_id = {c.task_id: c for c in checks}
    assert [c.task_id for c in checks] == list("abcdefg") and sorted(seen) == list("abcdefg")
    assert (by_id["a"].outcome, by_id["a"].setup_ok, by_id["a"].scorer_ok, by_id["a"].score) == ("ok", True, True, 0.0)
    b = by_id["b"]
    assert (b.outcome, b.setup_ok, b.scorer_ok) == ("setup_failed", False, None)
    assert b.reason == "task b: setup step 1 (launch) failed: no such program 'gimp'"
    c = by_id["c"]
    assert (c.outcome, c.setup_ok, c.scorer_ok, c.score) == ("scoring_failed", True, False, None)
    assert c.reason == "task c: scoring failed: TypeError: 'NoneType' object is not subscriptable"
    assert by_id["d"].outcome == "flagged" and "scores 1 with nothing done" in (by_id["d"].reason or "")
    assert (by_id["e"].outcome, by_id["e"].scorer_ok) == ("no_scorer", None)
    assert by_id["f"].outcome == "ok"  # lost once, checked again on a fresh loan
    assert by_id["g"].infeasible and by_id["g"].outcome == "ok" and by_id["g"].score == 0.0
    assert _Checked.most == 2
    summary = summarize_checks(checks, 12.0)
    assert not summary.ok and summary.errored == {"setup_failed": 1, "scoring_failed": 1}
    assert summary.line() == ("checked 7 tasks: set up 6, scored 4, flagged 1 (score 1 untouched), errored 2 "
                              "(scoring_failed 1, setup_failed 1); 12 s")


def test_a_clean_check_is_ok() -> None:
    assert summarize_checks([], 0.0).ok


def _ask(model: str, role_prompt: str) -> str:
    script = Script.get(model.split("/", 1)[1])
    request = ScriptRequest([ChatMessage(role="system", content=role_prompt),
                             ChatMessage(role="user", content="Step 1.\nAnything at all.")], GenerateConfig(), "policy")
    reply = script.take(request)
    return reply.text


def test_the_do_nothing_policies_end_any_task_at_once() -> None:
    for model, call in NOOP_MODELS.items():
        register_noop(model)
        reply = _ask(model, "You operate a computer ...")
        assert reply.rstrip().endswith(f"```python\n{call}\n```")
        assert _ask(model, "You review the progress ...").startswith("ON-TRACK")


def test_a_benchmark_without_a_model_or_key_points_to_the_keyless_checks(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    agent = Path(sys.executable).with_name("agent-s3")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run([str(agent), "bench", "local", "--run-id", "nokey", "--out", str(tmp_path / "runs")],
                          env={**env, "AGENT_S3_ENV_DIR": str(tmp_path / "envs")}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0] and "--model scripted/noop" in lines[0], done.stderr
    assert "agent-s3 tasks check" in lines[0] and not (tmp_path / "envs").exists()
