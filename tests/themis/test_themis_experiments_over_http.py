"""The paper's experiment switches, each end to end through the official OpenAI SDK against
the local protocol servers (OpenAI, and Anthropic for the switches that change the calls
made): ablations (no selector, verifier, reviewer or judge; no
assignment goals; the advisor reviewer), per-role models and decoding, and voting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from critic_fixtures import PAPER_NOT_QA, Roles, asked_step, build_rollout, js, user_text

from core.llm import ChatModel, Ledger, Script, ScriptRequest
from testing.llm import AnthropicServer, FakeServer, OpenAIServer
from themis import ThemisRecord, make_critic
from themis.record import ThemisVoteRecord
from themis.verifier import NO_GOAL

KEY = "sk-test-themis-experiments-42"
SELECT = js(key_steps=[{"step_index": 0, "assessment_goal": "the editor shows hello", "why_important": "content"},
                       {"step_index": 1, "assessment_goal": "the title reads notes.txt", "why_important": "saved"}],
            rationale="content and save")
STOP = js(need_more_steps=False, reason_to_stop="both verified")
ISSUES = js(issues=[{"id": "ISS-1", "summary": "reminder", "risk": "warning", "related_steps": [1],
                     "evidence_needed": "title", "notes": ""}], overall_commentary="nothing blocks")
JUDGE = js(qa_answer_review=PAPER_NOT_QA, final_decision="completed", justification="Steps 0 and 1 prove it.",
           failure_window={"start_step": -1, "end_step": -1, "reason": ""},
           critical_evidence=[{"step_index": 1, "verdict": "success", "cue": "title"}])


def verify(request: ScriptRequest) -> str:
    step = asked_step(request)
    return js(verified_steps=[{"step_index": step, "verdict": "success", "evidence": [f"AFTER of step {step}"],
                               "notes": ""}])


def roles(**extra: Any) -> Roles:
    handlers: dict[str, Any] = {"selector_initial": lambda r: SELECT, "selector_followup": lambda r: STOP,
                                "verifier": verify, "reviewer": lambda r: ISSUES, "judge": lambda r: JUDGE}
    handlers.update(extra)
    return Roles(handlers)


async def _grade(runs: Path, router: Roles, calls: int, *, role_models: tuple[str, ...] = (),
                 server_cls: type[FakeServer] = OpenAIServer, **options: Any) -> tuple[Any, FakeServer]:
    task, rd = build_rollout(runs, actions=2)
    script = Script("wire", [router] * calls)
    name = "openai/gpt-4o" if server_cls is OpenAIServer else "anthropic/claude-haiku-4-5"
    async with server_cls(script, api_key=KEY) as server:
        main = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY, ledger=Ledger())
        others = {role: ChatModel.from_name(name, base_url=server.base_url, api_key=KEY)
                  for role, name in (r.split("=") for r in role_models)}
        try:
            verdict = await make_critic("themis", main, role_models=others or None, **options)(task, rd)
        finally:
            for m in (main, *others.values()):
                await m.aclose()
    script.assert_done()
    return verdict, server


SERVERS = pytest.mark.parametrize("server_cls", [OpenAIServer, AnthropicServer])


@pytest.mark.integration
@SERVERS
async def test_without_selector_every_step_is_verified(runs: Path, server_cls: type[FakeServer]) -> None:
    router = roles()
    verdict, _ = await _grade(runs, router, 2 + 1 + 1, selector=False, server_cls=server_cls)
    assert router.count("selector") == 0 and verdict.reward == 1 and verdict.options["selector"] is False
    record = verdict.record
    assert isinstance(record, ThemisRecord) and [c.milestone.step for c in record.checks()] == [0, 1]
    assert record.passes[0].stopped == "every_step"


@pytest.mark.integration
@SERVERS
async def test_without_verifier_milestones_count_as_verified(runs: Path, server_cls: type[FakeServer]) -> None:
    router = roles()
    verdict, _ = await _grade(runs, router, 1 + 1 + 1, verifier=False, server_cls=server_cls)
    assert router.count("verifier") == 0 and verdict.reward == 1
    record = verdict.record
    assert isinstance(record, ThemisRecord) and all(c.assumed and c.verdict == "success" for c in record.checks())
    assert "not checked: the verifier is switched off" in user_text(router.seen["judge"][0])


@pytest.mark.integration
async def test_without_reviewer_the_milestones_go_to_the_judge(runs: Path) -> None:
    router = roles()
    verdict, _ = await _grade(runs, router, 1 + 2 + 1, reviewer="off")
    assert router.count("reviewer") == 0 and verdict.reward == 1
    assert isinstance(verdict.record, ThemisRecord) and verdict.record.reviews == []


@pytest.mark.integration
async def test_the_advisor_reviewer_has_its_own_prompt(runs: Path) -> None:
    router = roles()
    verdict, _ = await _grade(runs, router, 1 + 2 + 1 + 1, reviewer="advisor")
    assert "as an advisor" in router.seen["reviewer"][0].messages[0].text() and verdict.reward == 1


@pytest.mark.integration
@SERVERS
async def test_without_judge_success_needs_every_milestone(runs: Path, server_cls: type[FakeServer]) -> None:
    def one_fails(request: ScriptRequest) -> str:
        step = asked_step(request)
        verdict = "failure" if step == 1 else "success"
        return js(step=step, verdict=verdict, evidence=["AFTER"], feedback="the title still says Untitled")
    router = roles(verifier=one_fails)
    verdict, _ = await _grade(runs, router, 1 + 2 + 1, judge=False, server_cls=server_cls)
    assert router.count("judge") == 0 and verdict.reward == 0 and verdict.error is None
    assert verdict.reason == "no judge: 1 of 2 milestones verified as success"


@pytest.mark.integration
async def test_without_assignment_goals_the_verifier_gets_none(runs: Path) -> None:
    router = roles()
    verdict, _ = await _grade(runs, router, 1 + 2 + 1 + 1, assignment_goals=False)
    text = user_text(router.seen["verifier"][0])
    assert NO_GOAL in text and "the editor shows hello" not in text and verdict.reward == 1


@pytest.mark.integration
async def test_per_role_models_and_decoding(runs: Path) -> None:
    router = roles()
    verdict, server = await _grade(runs, router, 1 + 2 + 1 + 1, role_models=("judge=openai/gpt-4o-mini",),
                                   models={"judge": "openai/gpt-4o-mini"}, decoding={"verifier": {"temperature": 0.7}})
    assert verdict.reward == 1 and verdict.options["models"] == {"judge": "openai/gpt-4o-mini"}
    sent = [(r.body["model"], r.body.get("temperature")) for r in server.requests]
    assert sent[-1] == ("gpt-4o-mini", 0.0)  # the judge, on its own model
    assert sorted(t for m, t in sent if t == 0.7) == [0.7, 0.7]  # the two verifier calls
    assert {m for m, _ in sent[:-1]} == {"gpt-4o"}


@pytest.mark.integration
@pytest.mark.parametrize(("rule", "reward", "server_cls"), [("majority", 1, OpenAIServer), ("all", 0, AnthropicServer),
                                                            ("any", 1, OpenAIServer)])
async def test_voting_over_three_deliberations(runs: Path, rule: str, reward: int, server_cls: type[FakeServer]) -> None:
    decisions = iter(["completed", "not_completed", "completed"])

    def judge(request: ScriptRequest) -> str:
        decision = next(decisions)
        window = {"start_step": -1, "end_step": -1} if decision == "completed" else {"start_step": 1, "end_step": 1}
        return js(qa_answer_review=PAPER_NOT_QA, final_decision=decision, justification="see step 1", failure_window=window)

    router = roles(judge=judge)
    # Claude takes no temperature under the SDK's API version: its votes differ by its own sampling.
    temperature = 0.7 if server_cls is OpenAIServer else None
    verdict, _ = await _grade(runs, router, 3 * (1 + 2 + 1 + 1), votes=3, vote=rule, temperature=temperature,
                              server_cls=server_cls)
    record = verdict.record
    assert isinstance(record, ThemisVoteRecord) and record.rewards == [1, 0, 1] and len(record.runs) == 3
    assert verdict.reward == reward and verdict.calls == 15


def test_voting_at_temperature_zero_is_refused() -> None:
    Script("x", [])
    with pytest.raises(ValueError, match="temperature"):
        make_critic("themis", ChatModel.from_name("scripted/x"), votes=3, temperature=0.0)
    assert make_critic("themis", ChatModel.from_name("scripted/x"), votes=3) is not None  # diverse by default
    with pytest.raises(ValueError, match="none was built"):
        make_critic("themis", ChatModel.from_name("scripted/x"), models={"judge": "openai/gpt-4o-mini"})
