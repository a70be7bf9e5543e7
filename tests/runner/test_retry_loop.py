"""The retry strategy's loop with a pluggable rollout step that writes real rollout folders
(Pillow screenshots) and a scripted critic: it stops at the first accepted attempt and at
the cap, scores every attempt, keeps the critic's record beside each, and records which
attempt was final. Desktop runs of the same loop are in test_retry_desktop."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from core.llm import ChatModel, ImagePart, Ledger, Reply, Script
from core.protocols import Environment
from core.trajectory import RolloutInfo, RunLayout, Step, Task
from runner.config import load_run_config
from runner.environments import FixedPool
from runner.models import ModelSet
from runner.outcomes import RolloutResult
from runner.retry import RetryUntilSuccess, check_critic
from runner.strategy import RolloutOutcome, TaskRun, check_strategy

TASK = Task(id="calc-sum", instruction="Put the sum of A1:A3 into A4 and save the sheet")


def _png(label: str, colour: str) -> bytes:
    img = Image.new("RGB", (320, 200), colour)
    ImageDraw.Draw(img).text((10, 90), label, fill="black")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


class WrittenRollouts:
    """A rollout step that writes a two-step rollout folder per attempt and gives it the
    next planned (status, score); it records the seeds it was given."""

    def __init__(self, plan: list[tuple[str, float | None]]) -> None:
        self.plan = plan
        self.seeds: list[int | None] = []

    async def __call__(self, run: TaskRun, k: int, env: Environment, *, seed: int | None = None) -> RolloutOutcome:
        status, score = self.plan[k]
        self.seeds.append(seed)
        rd = run.layout.rollout(run.task.id, k)
        rd.start(RolloutInfo(run_id=run.layout.run_id, task_id=run.task.id, rollout=k, model="scripted/policy",
                             seed=seed, started_at=time.time()))
        rd.append_step(Step(index=0, thought="I type the formula", action={"kind": "type", "text": "=SUM(A1:A3)"}),
                       {"before": _png(f"attempt {k} start", "white"), "after": _png(f"attempt {k} typed", "khaki")})
        rd.append_step(Step(index=1, thought="Done.", action={"kind": "done"}),
                       {"before": _png(f"attempt {k} typed", "khaki")})
        rd.finish(status, "planned", score=score)  # type: ignore[arg-type]
        result = RolloutResult(status, "planned", 2, "done", 0.0, 0.0)  # type: ignore[arg-type]
        return RolloutOutcome(k, result, score)


def _critic(rewards: list[int]) -> tuple[ChatModel, Script, Ledger]:
    replies = [Reply(text=json.dumps({"reason": f"verdict {i}: the sheet {'shows' if r else 'lacks'} the sum", "score": r}))
               for i, r in enumerate(rewards)]
    script = Script("retry-critic", replies)
    ledger = Ledger()
    return ChatModel.from_name("scripted/retry-critic", ledger=ledger), script, ledger


def _run(tmp_path: Path, ledger: Ledger, **config: object) -> TaskRun:
    cfg = load_run_config([{"rollout": {"settle_seconds": 0}}, config])
    Script("unused-policy", [])  # the planned rollouts never ask the policy
    policy = ChatModel.from_name("scripted/unused-policy")
    models = ModelSet(policy=policy, grounding=policy, code=policy, reflection=policy)
    layout = RunLayout(tmp_path / "runs", "retry-1", durable=False)
    # The planned step never touches an environment; the pool only has to lend something.
    pool = FixedPool("no environment")  # type: ignore[arg-type]
    return TaskRun(task=TASK, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger)


async def test_stops_at_the_first_accepted_attempt(tmp_path: Path) -> None:
    model, script, ledger = _critic([0, 1])
    step = WrittenRollouts([("done", 0.0), ("done", 1.0), ("done", 1.0)])
    run = _run(tmp_path, ledger, seed=7)
    strategy = RetryUntilSuccess(critic="lastk", model=model, attempts=3, rollout=step)

    result = await strategy(run)

    script.assert_done()  # exactly two critic calls
    assert run.task_dir.rollout_indices() == [0, 1]
    assert step.seeds == [7, 8]  # a fresh seed per attempt, or the retry would repeat itself
    assert result.scores == {0: 0.0, 1: 1.0} and result.selected == 1 and result.selected_score == 1.0
    assert run.task_dir.read_result() == result
    history = strategy.history[TASK.id]
    assert [a.accepted for a in history] == [False, True]
    assert strategy.outcomes[TASK.id].index == 1
    # Each attempt's deliberation sits beside its trajectory.
    for k, reward in ((0, 0), (1, 1)):
        saved = json.loads((run.layout.rollout(TASK.id, k).path / "critic-lastk.json").read_text())
        assert saved["reward"] == reward and saved["reason"].startswith(f"verdict {k}")
    # The ledger holds the critic's calls under module "critic", tagged with their attempt.
    calls = [r for r in ledger.records if r.module == "critic"]
    assert [r.tags["rollout"] for r in calls] == ["0", "1"]
    assert {r.tags["task"] for r in calls} == {TASK.id} and {r.tags["run"] for r in calls} == {"retry-1"}
    selection = run.task_dir.read_selection()
    assert selection is not None and selection.strategy == "retry-lastk"
    assert selection.candidates == [0, 1] and selection.chosen == 1
    assert selection.call_ids == [r.id for r in calls]
    assert "attempt 1 was accepted" in selection.reasoning and "attempt 0: done after 2 steps, score 0" in selection.reasoning


async def test_stops_at_the_cap_and_the_last_attempt_is_final(tmp_path: Path) -> None:
    model, script, ledger = _critic([0, 0, 0])
    step = WrittenRollouts([("done", 1.0), ("failed", 0.0), ("done", 0.0), ("done", 1.0)])
    run = _run(tmp_path, ledger)
    strategy = RetryUntilSuccess(critic="lastk", model=model, attempts=3, rollout=step)

    result = await strategy(run)

    script.assert_done()
    assert run.task_dir.rollout_indices() == [0, 1, 2]
    assert step.seeds == [None, None, None]
    # The evaluator scored every attempt; the final (last) one is the task's score, even
    # though an earlier attempt the critic rejected had succeeded.
    assert result.scores == {0: 1.0, 1: 0.0, 2: 0.0}
    assert result.selected == 2 and result.selected_score == 0.0 and result.pass_at_n == 1.0
    selection = run.task_dir.read_selection()
    assert selection is not None and selection.chosen == 2
    assert selection.reasoning.startswith("no attempt was accepted within 3")


async def test_a_world_failure_uses_an_attempt_without_a_critic_call(tmp_path: Path) -> None:
    model, script, ledger = _critic([1])
    step = WrittenRollouts([("environment_lost", None), ("done", 1.0)])
    run = _run(tmp_path, ledger, critic={"attempts": 2})
    strategy = RetryUntilSuccess(critic="lastk", model=model, rollout=step)

    result = await strategy(run)

    script.assert_done()  # one call: the lost rollout was never shown to the critic
    history = strategy.history[TASK.id]
    assert history[0].verdict is None and "environment_lost" in (history[0].error or "")
    assert not (run.layout.rollout(TASK.id, 0).path / "critic-lastk.json").exists()
    assert result.selected == 1 and result.scores == {0: None, 1: 1.0}


async def test_the_run_configuration_names_critic_and_cap(tmp_path: Path) -> None:
    model, script, ledger = _critic([0, 0])
    step = WrittenRollouts([("done", 0.0)] * 3)
    run = _run(tmp_path, ledger, critic={"name": "lastk", "attempts": 2, "options": {"k": 1}})
    strategy = RetryUntilSuccess(model=model, rollout=step)

    await strategy(run)

    script.assert_done()
    assert run.task_dir.rollout_indices() == [0, 1]
    # k=1: the critic was shown one screen, the last one.
    shown = [p for m in script.requests[0].messages for p in m.parts() if isinstance(p, ImagePart)]
    assert len(shown) == 1


async def test_bad_critic_options_fail_before_any_rollout(tmp_path: Path) -> None:
    model, _, ledger = _critic([])
    step = WrittenRollouts([("done", 0.0)])
    with pytest.raises(ValueError, match="selector_rounds for lastk"):  # in the configuration: refused at load
        _run(tmp_path, ledger, critic={"name": "lastk", "options": {"selector_rounds": 3}})
    run = _run(tmp_path, ledger, critic={"name": "lastk"})
    with pytest.raises(ValueError, match="selector_rounds"):  # given by a caller: refused before any rollout
        await RetryUntilSuccess(model=model, rollout=step, options={"selector_rounds": 3})(run)
    assert step.seeds == [] and not run.task_dir.path.exists()


def test_check_critic_refuses_what_cannot_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    scripted = load_run_config([{"strategy": "retry", "policy": {"model": "scripted/demo"}}])
    with pytest.raises(ValueError, match="--critic-model"):
        check_critic(scripted)
    no_key = load_run_config([{"strategy": "retry", "policy": {"model": "scripted/demo"},
                               "critic": {"model": {"model": "openai/gpt-5"}}}])
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        check_critic(no_key)
    anthropic = load_run_config([{"strategy": "retry", "critic": {"model": {"model": "anthropic/claude-x"}}}])
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        check_critic(anthropic)
    with pytest.raises(ValueError, match=r"critic\.options\.k for lastk: Input should be greater"):  # refused at load
        load_run_config([{"strategy": "retry", "policy": {"model": "scripted/demo"},
                          "critic": {"name": "lastk", "options": {"k": 0}, "model": {"model": "scripted/c"}}}])
    check_strategy(load_run_config([{"policy": {"model": "scripted/demo"}}]))  # single: nothing to check
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_critic(no_key)


async def test_a_failed_critic_is_shown_as_an_error_not_a_rejection(tmp_path: Path) -> None:
    bad = [Reply(text="I cannot tell.")] * 3  # never JSON: the critic fails on attempt 0
    good = Reply(text=json.dumps({"reason": "the sheet shows the sum", "score": 1}))
    script = Script("retry-critic", [*bad, good])
    ledger = Ledger()
    model = ChatModel.from_name("scripted/retry-critic", ledger=ledger)
    step = WrittenRollouts([("done", 1.0), ("done", 1.0)])
    run = _run(tmp_path, ledger)
    strategy = RetryUntilSuccess(critic="lastk", model=model, attempts=2, rollout=step)

    await strategy(run)

    script.assert_done()
    history = strategy.history[TASK.id]
    assert history[0].critic_error is not None and not history[0].accepted and history[1].accepted
    saved = json.loads((run.layout.rollout(TASK.id, 0).path / "critic-lastk.json").read_text())
    assert saved["reward"] is None and saved["error"].startswith("1 of 1 samples failed")
    selection = run.task_dir.read_selection()
    assert selection is not None
    assert "attempt 0: done after 2 steps, score 1; critic ERROR (the critic failed" in selection.reasoning
    assert "the critic failed on attempt(s) 0 (errors, not rejections" in selection.reasoning


async def test_a_failed_setup_uses_an_attempt_unjudged_and_a_failed_scorer_is_still_judged(tmp_path: Path) -> None:
    model, script, ledger = _critic([0, 1])  # two calls: attempts 1 and 2, none for the failed setup
    written = WrittenRollouts([("done", None), ("done", None), ("done", 1.0)])

    async def step(run: TaskRun, k: int, env: Environment, *, seed: int | None = None) -> RolloutOutcome:
        if k == 0:
            result = RolloutResult("setup_failed", "task calc-sum: setup step 0 (open) failed: no file", 0, None, 0, 0)
            return RolloutOutcome(0, result, None, result.reason)
        outcome = await written(run, k, env, seed=seed)
        return outcome if k == 2 else RolloutOutcome(k, outcome.result, None, "task calc-sum: scoring failed: KeyError")

    run = _run(tmp_path, ledger)
    result = await RetryUntilSuccess(critic="lastk", model=model, attempts=3, rollout=step)(run)

    script.assert_done()
    assert result.selected == 2 and result.selected_score == 1.0
    assert {k: e.outcome for k, e in result.errors.items()} == {0: "setup_failed", 1: "scoring_failed"}
    assert result.errored and result.pass_at_n is None  # counted as an errored task, never as a score
    selection = run.task_dir.read_selection()
    assert selection is not None and "attempt 1: done after 2 steps, score none (scoring_failed)" in selection.reasoning
    assert "attempt 0: setup_failed after 0 steps, score none (setup_failed); critic not judged" in selection.reasoning
