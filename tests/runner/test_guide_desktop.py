"""Guided rollouts on a real desktop, every reply served over HTTP by the local OpenAI
protocol server: at the step where the policy's candidates diverge, the first (by the
policy's order) would type the wrong item and the scorer prefers the one that solves the
task; the rollout executes the higher-scored candidate and the task's evaluator scores 1.
Also: the step records hold every candidate and its score, GUI-PRA's overlay is stored
beside its step, and guided rollouts run inside wide scaling with the Behavior Judge."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from contract_replies import structured
from core.llm import Ledger, Script, ScriptRequest
from core.trajectory import RunLayout, Trajectory
from environments.local import LocalEnvironment
from gprm import PAPER_SEEDS, GuideRecord
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply, role_of
from runner.environments import FixedPool
from runner.models import build_models
from runner.report import write_report
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

TASK = "mousepad-append-line"
KEY = "sk-guide-test-key"
GOOD = "agent.type(text='apples', enter=True)"
BAD = "agent.type(text='bananas', enter=True)"


def _text(content: str | list[dict[str, str]]) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _system(request: ScriptRequest) -> str:
    return next((m.text() for m in request.messages if m.role == "system"), "")


def diverging_policy_and_guide(scored: list[str] | None = None) -> Callable[[ScriptRequest], str]:
    """The solver's plan, except that at step 3 the first seed's candidate types 'bananas'.
    The guide: scores 9 for a candidate that solves the task and 2 for the wrong item;
    routing calls the UI parser once when the candidates differ, else ends at once."""
    plan = PlannedReplies(plan=list(DEMO_PLANS[TASK].plan))
    first_seed = PAPER_SEEDS[0]

    def reply(request: ScriptRequest) -> str:
        system, text = _system(request), request.messages[-1].text()
        if system.startswith("You are a process reward model"):
            action = text.split("Candidate action to score:", 1)[1]
            if scored is not None:
                scored.append(action)
            bad = "'bananas'" in action
            return f'<eval>{{"score": {2 if bad else 9}, "reason": "{"wrong item" if bad else "on plan"}"}}</eval>'
        if system.startswith("You gather visual evidence"):
            if "- ui_parser:" in system and "'bananas'" in text:
                return json.dumps({"thought": "see the editor", "actions": [{"name": "ui_parser", "arguments": {}}]})
            return json.dumps({"thought": "enough", "actions": [{"name": "terminate", "arguments": {"answer": "ok"}}]})
        if role_of(request.messages) == "policy" and request.config.seed == first_seed and "\nStep 3.\n" in f"\n{text}\n":
            return action_reply("I type the item.", BAD)
        return plan(request)

    return structured(reply)


def _check_guided(traj: Trajectory, guide: str, k: int) -> None:
    steps = traj.steps
    assert [s.action["kind"] for s in steps if s.action] == ["click", "hotkey", "type", "hotkey", "done"]
    assert steps[2].action is not None and steps[2].action["text"] == "apples"
    for step in steps:
        assert step.guide is not None
        images = step.guide.pop("images")
        record = GuideRecord.model_validate(step.guide)
        assert record.guide == guide and len(record.candidates) == k
        assert [c.seed for c in record.candidates] == list(PAPER_SEEDS[:k])
        assert all(c.score is not None for c in record.candidates)
        if step.index == 2:
            assert [c.action for c in record.candidates] == [BAD] + [GOOD] * (k - 1)
            assert [c.score for c in record.candidates] == [2.0] + [9.0] * (k - 1)
            assert record.chosen == 1 and record.chosen_score == 9.0 and not record.fallback
            if guide == "gprm":
                assert record.routing is not None and [t.name for t in record.routing.tools] == ["ui_parser"]
                assert record.routing.tools[0].ok and record.routing.stop == "terminate"
                assert set(images) == {"ui_parser"}
            else:
                assert record.routing is None and images == {}
        else:
            assert record.chosen == 0 and images == {}
    assert steps[0].timings.propose > 0


@pytest.mark.parametrize("guide", ["gprm", "prm"])
async def test_guided_rollout_executes_the_higher_scored_candidate(harness, local_env: LocalEnvironment,
                                                                    guide: str) -> None:
    task = resolve_task(TASK)
    scored: list[str] = []
    ran = await harness.run(task, local_env, diverging_policy_and_guide(scored), run_id=f"guided-{guide}",
                            config={"guide": {"name": guide, "candidates": 2}})

    assert ran.outcome.result.status == "done" and ran.outcome.score == 1.0
    traj = ran.trajectory
    rd = ran.layout.rollout(task.id, 0)
    if guide == "gprm":
        overlay = traj.steps[2].guide["images"]["ui_parser"]  # type: ignore[index]
        assert overlay == "step-0002-extra-guide_ui_parser.png"
        assert (rd.path / overlay).read_bytes().startswith(b"\x89PNG")
    _check_guided(traj, guide, 2)
    # The report shows every candidate with its score, the pick, and the guide's pictures.
    page = write_report(ran.layout).read_text()
    assert page.count("<b>guide</b> " + guide) == len(traj.steps)
    assert "agent.type(text=&#x27;bananas&#x27;, enter=True)" in page and "2/10" in page and "9/10" in page
    assert "candidate 2 of 2 (9/10)" in page and "wrong item" in page
    if guide == "gprm":
        assert f"rollout-0/{overlay}" in page and "<b>ui_parser</b>" in page
    # Both candidates were scored at every step, each once.
    assert len(scored) == 2 * len(traj.steps)
    # Candidates were drawn with the paper's seeds and sampling; the guide's calls are module prm.
    policy = [r for r in ran.server.requests if _text(r.body["messages"][0]["content"]).startswith("You operate")]
    assert sorted({r.body.get("seed") for r in policy}) == sorted(PAPER_SEEDS[:2])
    assert {r.body.get("temperature") for r in policy} == {0.5} and {r.body.get("top_p") for r in policy} == {0.9}
    records = ran.ledger.records
    prm = [r for r in records if r.module == "prm"]
    assert prm and all(r.tags["rollout"] == "0" and r.tags["task"] == task.id for r in prm)
    # Every ledger call is named by exactly one step (candidates by call_id tag, guide calls by record id).
    named = [cid for s in traj.steps for cid in s.call_ids]
    assert len(named) == len(set(named)) == len(records)
    assert set(named) == {r.tags.get("call_id", r.id) if r.module != "prm" else r.id for r in records}


async def test_guided_wide_scaling_with_the_behavior_judge(local_env: LocalEnvironment, tmp_path: Path) -> None:
    """N=2 guided rollouts (one desktop, one after the other) and one bjudge pick; each
    rollout has its own guide, whose memory starts empty."""
    task = resolve_task(TASK)
    judged: list[str] = []

    @structured
    def judge(request: ScriptRequest) -> str:
        system = _system(request)
        text = "\n".join(m.text() for m in request.messages if m.role != "system")
        if system.startswith("You describe what a single computer action"):
            fact = "A new last line 'apples' appears" if "'apples'" in text else "The editor changed"
            return f"<thoughts>Compared.</thoughts>\n<facts>\n- {fact}\n</facts>"
        judged.append(text)
        return "<thoughts>Candidate 1 typed apples.</thoughts>\n<answer>1</answer>"

    layout = RunLayout(tmp_path / "runs", "guided-wide", durable=False)
    layout.path.mkdir(parents=True)
    ledger = Ledger(layout.ledger_path)
    async with OpenAIServer(Script("guided-wide", [diverging_policy_and_guide()] * 400), api_key=KEY) as server, \
            OpenAIServer(Script("guided-wide-judge", [judge] * 100), api_key=KEY) as judge_server:
        cfg = load_run_config([{
            "policy": {"model": "openai/policy", "base_url": server.base_url, "api_key": KEY},
            "rollout": {"settle_seconds": 0.2},
            "strategy": "wide",
            "guide": {"name": "prm", "candidates": 2},
            "wide": {"rollouts": 2, "concurrency": 1, "seed": 3, "judge": "bjudge",
                     "judge_model": {"model": "openai/judge", "base_url": judge_server.base_url, "api_key": KEY}},
        }])
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        run = TaskRun(task=task, layout=layout, config=cfg, pool=FixedPool(local_env), models=models, ledger=ledger)
        try:
            result = await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()

    assert [o.score for o in strategy.outcomes[task.id]] == [1.0, 1.0]
    selection = layout.task(task.id).read_selection()
    assert selection is not None and sorted(selection.candidates) == [0, 1] and len(judged) == 1
    assert result.selected == selection.chosen and result.selected in (0, 1) and result.selected_score == 1.0
    for k in (0, 1):
        _check_guided(layout.rollout(task.id, k).read(), "prm", 2)
    prm = [r for r in ledger.records if r.module == "prm"]
    assert {r.tags["rollout"] for r in prm} == {"0", "1"}
    assert re.findall(r"===== Candidate (\d+) =====", judged[0]) == ["1", "2"]


# `agent-s3 run --guide gprm --strategy retry` as a subprocess (each attempt guided afresh,
# the guide on its own model): test_current_models_desktop.py, guided retry run.
