"""Retry-until-success on a real desktop: the runner rolls out, the task's evaluator scores,
a critic (its replies scripted, over loopback HTTP like the policy's) decides whether to try
again. Then `critic`, `filter` and `critic-bench` run on the run folder that left."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from runner_helpers import desktops_missing
from typer.testing import CliRunner

from contract_replies import structured
from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RunLayout, Task
from environments.local import LocalEnvironment
from runner.cli import app
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply
from runner.environments import FixedPool
from runner.models import build_models
from runner.report import write_report
from runner.retry import RetryUntilSuccess
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-retry-desktop-" + "k" * 12
TASK_ID = "mousepad-append-line"


@dataclass
class PolicyAndCritic:
    """One server's replies: the last-K critic answers `rewards` in order; the policy gives
    up at once (declares done untouched) until the critic has spoken `solve_after` times,
    then follows the task's demo plan."""

    rewards: list[int]
    solve_after: int
    critic_requests: list[ScriptRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.quit = PlannedReplies(plan=[action_reply("The list already looks complete.", "agent.done()")])
        demo = DEMO_PLANS[TASK_ID]
        self.solve = PlannedReplies(plan=list(demo.plan))

    def __call__(self, request: ScriptRequest) -> str:
        return structured(self._answer)(request)  # type: ignore[no-any-return]

    def _answer(self, request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        if "from the last screens" in system:
            self.critic_requests.append(request)
            reward = self.rewards.pop(0)
            return json.dumps({"reason": "apples is the last line" if reward else "the list is unchanged",
                               "score": reward})
        policy = self.solve if len(self.critic_requests) >= self.solve_after else self.quit
        return policy(request)


async def _retry(root: Path, env: LocalEnvironment, replies: PolicyAndCritic, attempts: int
                 ) -> tuple[TaskRun, RetryUntilSuccess, OpenAIServer, Task]:
    task = resolve_task(TASK_ID)
    async with OpenAIServer(Script("retry-desktop", [replies] * 200), api_key=KEY) as server:
        cfg = load_run_config([{
            "policy": {"model": "openai/policy-model", "base_url": server.base_url, "api_key": KEY},
            "rollout": {"settle_seconds": 0.2, "max_steps": 8},
            "strategy": "retry",
            "critic": {"name": "lastk", "attempts": attempts,
                       "model": {"model": "openai/critic-model", "base_url": server.base_url, "api_key": KEY}},
        }])
        layout = RunLayout(root / "runs", "retry-desk", durable=False)
        layout.path.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        run = TaskRun(task=task, layout=layout, config=cfg, pool=FixedPool(env), models=models, ledger=ledger)
        strategy = RetryUntilSuccess()
        try:
            await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()
    return run, strategy, server, task


def _critic_calls(run: TaskRun) -> list[str]:
    return [r.tags["rollout"] for r in run.ledger.records if r.module == "critic"]


async def test_retry_stops_at_the_first_accepted_attempt_then_the_commands_grade_the_run(
        local_env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replies = PolicyAndCritic(rewards=[0, 1], solve_after=1)
    run, strategy, server, task = await _retry(tmp_path, local_env, replies, attempts=3)

    # Two rollouts, two critic calls (one per attempt, on the critic's own model), then stop.
    assert run.task_dir.rollout_indices() == [0, 1]
    assert _critic_calls(run) == ["0", "1"] and not replies.rewards
    assert sum(1 for r in server.requests if r.body["model"] == "critic-model") == 2
    first, second = run.layout.rollout(task.id, 0).read(), run.layout.rollout(task.id, 1).read()
    assert [s.action["kind"] for s in first.steps] == ["done"]
    assert [s.action["kind"] for s in second.steps] == ["click", "hotkey", "type", "hotkey", "done"]
    # The evaluator scored both; the accepted (final) attempt's score is the task's.
    result = run.task_dir.read_result()
    assert result is not None and result.scores == {0: 0.0, 1: 1.0}
    assert result.selected == 1 and result.selected_score == 1.0
    assert strategy.outcomes[task.id].score == 1.0
    selection = run.task_dir.read_selection()
    assert selection is not None and selection.chosen == 1 and len(selection.call_ids) == 2
    for k, reward in ((0, 0), (1, 1)):
        verdict = json.loads((run.layout.rollout(task.id, k).path / "critic-lastk.json").read_text())
        assert verdict["reward"] == reward and verdict["model"] == "openai/critic-model"
    # The critic saw the attempt's own last screens: two images, the last one the final screen.
    shown = replies.critic_requests[1].messages[-1].parts()
    assert sum(1 for p in shown if type(p).__name__ == "ImagePart") == 2
    # The report shows the retry's pick and each attempt's deliberation.
    html = (await asyncio.to_thread(write_report, run.layout)).read_text()
    assert "retry-lastk" in html and html.count('<details class="critic">') == 2
    assert "lastk (openai/critic-model): REJECT after 1 calls" in html and "the list is unchanged" in html

    # The same folder through the commands (each in a thread: they run their own event loop).
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out_dir = tmp_path / "accepted"
    done = await asyncio.to_thread(CliRunner().invoke, app, [
        "filter", str(run.layout.path), "--critic", "lastk", "--model", "openai/critic-model",
        "--base-url", "http://127.0.0.1:9", "--out", str(out_dir)])
    assert done.exit_code == 0, done.output  # the retry's saved verdicts were reused: no call
    assert "lastk: exported 1 of 2 rollouts" in done.stdout
    assert RunLayout(tmp_path, "accepted").task(task.id).rollout_indices() == [1]

    Script("desk-sequential", [Reply(text=json.dumps({"reason": "not yet", "satisfied": False}))] * 12)
    done = await asyncio.to_thread(CliRunner().invoke, app, [
        "critic", str(run.layout.path), "--critic", "sequential", "--model", "scripted/desk-sequential"])
    assert done.exit_code == 0, done.output
    assert "sequential: accepted 0 of 2" in done.stdout
    assert "agreement with the evaluators: 1 of 2 (50.0%)" in done.stdout
    assert (run.layout.rollout(task.id, 1).path / "critic-sequential.json").exists()

    labels = tmp_path / "labels.jsonl"
    done = await asyncio.to_thread(CliRunner().invoke, app, [
        "critic-bench", "--labels-from", str(run.layout.path), "--write", str(labels)])
    assert done.exit_code == 0, done.output
    assert [json.loads(line)["label"] for line in labels.read_text().splitlines()] == [0, 1]


async def test_retry_stops_at_the_cap_when_the_critic_never_accepts(local_env: LocalEnvironment, tmp_path: Path) -> None:
    replies = PolicyAndCritic(rewards=[0, 0], solve_after=99)
    run, strategy, _, task = await _retry(tmp_path, local_env, replies, attempts=2)

    assert run.task_dir.rollout_indices() == [0, 1] and _critic_calls(run) == ["0", "1"]
    result = run.task_dir.read_result()
    assert result is not None and result.scores == {0: 0.0, 1: 0.0} and result.selected == 1
    assert [a.accepted for a in strategy.history[task.id]] == [False, False]
    selection = run.task_dir.read_selection()
    assert selection is not None and selection.reasoning.startswith("no attempt was accepted within 2")


async def test_agent_s3_run_with_the_retry_strategy_as_a_subprocess(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("agent-s3")
    if not cli.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    replies = PolicyAndCritic(rewards=[0, 1], solve_after=1)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), OPENAI_API_KEY=KEY, COLUMNS="300")
    async with OpenAIServer(Script("retry-cli", [replies] * 200), api_key=KEY) as server:
        proc = await asyncio.create_subprocess_exec(
            str(cli), "run", "--task", TASK_ID, "--model", "openai/policy-model", "--base-url", server.base_url,
            "--strategy", "retry", "--attempts", "3", "--critic", "lastk", "--critic-model", "openai/critic-model",
            "-c", f"critic.model.base_url={server.base_url}", "--settle", "0.2", "--max-steps", "8",
            "--out", str(tmp_path / "runs"), "--run-id", "retry-cli",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    stdout = out.decode()
    assert proc.returncode == 0, stdout + err.decode()
    assert "retry attempt 0: done after 1 steps, score 0; critic REJECT: the list is unchanged" in stdout
    assert "retry attempt 1: done after 5 steps, score 1; critic ACCEPT: apples is the last line" in stdout
    assert "score 1 (the task's evaluator)" in stdout and not replies.rewards
    run = tmp_path / "runs" / "retry-cli"
    result = json.loads((run / TASK_ID / "result.json").read_text())
    assert result["selected"] == 1 and result["scores"] == {"0": 0.0, "1": 1.0}
    config = json.loads((run / "config.json").read_text())
    assert config["strategy"] == "retry" and config["critic"]["name"] == "lastk"
    assert config["critic"]["model"]["model"] == "openai/critic-model" and KEY not in (run / "config.json").read_text()


@dataclass
class SolveAndThemis:
    """The policy solves the task; OS-Themis's four roles answer as a careful critic would:
    one milestone (typing the item, step 2), verified, a sound review, then completed."""

    seen: dict[str, list[ScriptRequest]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.solve = PlannedReplies(plan=list(DEMO_PLANS[TASK_ID].plan))

    def __call__(self, request: ScriptRequest) -> str:
        return structured(self._answer)(request)  # type: ignore[no-any-return]

    def _answer(self, request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        for marker, role, reply in (
            ("You choose the milestones", "selector", {
                "milestones": [{"step": 2, "goal": "'apples' is on its own line at the end of the list",
                                "why": "the task is to add that item"}],
                "done": True, "reason": "typing the item is what the task asks; saving is checked by the judge"}),
            ("You verify one milestone", "verifier", {
                "step": 2, "verdict": 1, "evidence": ["the last line of the editor reads apples"]}),
            ("You audit the evidence", "reviewer", {"sound": True, "concerns": [], "summary": "the evidence shows the item"}),
            ("You decide whether a computer-use agent completed", "judge", {
                "decision": "completed", "reason": "apples was added and the file saved", "key_steps": [2],
                "qa": {"is_qa": False}}),
        ):
            if marker in system:
                self.seen.setdefault(role, []).append(request)
                return json.dumps(reply)
        return self.solve(request)


async def test_retry_with_the_themis_critic_accepts_a_solved_first_attempt(
        local_env: LocalEnvironment, tmp_path: Path) -> None:
    task = resolve_task(TASK_ID)
    replies = SolveAndThemis()
    async with OpenAIServer(Script("retry-themis", [replies] * 200), api_key=KEY) as server:
        cfg = load_run_config([{
            "policy": {"model": "openai/policy-model", "base_url": server.base_url, "api_key": KEY},
            "rollout": {"settle_seconds": 0.2, "max_steps": 8},
            "strategy": "retry", "critic": {"name": "themis", "attempts": 3},
        }])
        layout = RunLayout(tmp_path / "runs", "retry-themis", durable=False)
        layout.path.mkdir(parents=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = RetryUntilSuccess()
        run = TaskRun(task=task, layout=layout, config=cfg, pool=FixedPool(local_env), models=models, ledger=ledger)
        try:
            result = await strategy(run)
        finally:
            await models.aclose()

    assert run.task_dir.rollout_indices() == [0] and result.selected == 0 and result.selected_score == 1.0
    assert {role: len(v) for role, v in replies.seen.items()} == {"selector": 1, "verifier": 1, "reviewer": 1, "judge": 1}
    # The critic used the policy's model (no critic model configured); its calls are module "critic".
    critic_calls = [r for r in ledger.records if r.module == "critic"]
    assert len(critic_calls) == 4 and {r.model for r in critic_calls} == {"openai/policy-model"}
    # The verifier was shown the real before and after screens of step 2.
    verifier = replies.seen["verifier"][0]
    images = [p for m in verifier.messages for p in m.parts() if type(p).__name__ == "ImagePart"]
    assert len(images) == 2
    verdict = json.loads((run.layout.rollout(task.id, 0).path / "critic-themis.json").read_text())
    assert verdict["reward"] == 1 and verdict["record"]["kind"] == "themis"
    assert verdict["record"]["passes"][0]["rounds"][0]["checks"][0]["milestone"]["step"] == 2
