"""The whole OS-Themis deliberation through the official SDKs against local protocol
servers: the roles' prompts, screenshots and JSON replies survive the wire."""

from __future__ import annotations

from pathlib import Path

import pytest
from critic_fixtures import NOT_QA, Roles, asked_step, build_rollout, images_of, js

from core.llm import ChatModel, Ledger, Script, ScriptRequest
from testing.llm import AnthropicServer, FakeServer, OpenAIServer
from themis import ThemisRecord, grade_rollout, load_verdict, make_critic

KEY = "sk-test-themis-0123456789"

#: Where failure begins: the paper's judge contract asks for it with every decision but "completed".
WINDOW = {"start_step": 0, "end_step": 0, "reason": "the first step already shows the problem"}


def verify(request: ScriptRequest) -> str:
    step = asked_step(request)
    return js(step=step, verdict=int(step != 1), evidence=[f"AFTER of step {step}"],
              feedback="the dialog is still open" if step == 1 else "")


@pytest.mark.integration
@pytest.mark.parametrize(("server_cls", "name"), [(OpenAIServer, "openai/gpt-4o"),
                                                  (AnthropicServer, "anthropic/claude-haiku-4-5")])
async def test_themis_over_http(runs: Path, server_cls: type[FakeServer], name: str) -> None:
    task, rd = build_rollout(runs, actions=3)
    roles = Roles({
        "selector_initial": [js(milestones=[{"step": 1, "goal": "the Save dialog is closed", "why": "commit"},
                                            {"step": 2, "goal": "the title shows notes.txt", "why": "saved"}],
                                reason="save and name")],
        "selector_followup": [js(done=True, reason="both requirements are covered")],
        "verifier": verify,
        "reviewer": [js(concerns=[], sound=True, summary="The failed save at step 1 is captured.")],
        "judge": [js(qa=NOT_QA, decision="not_completed", failure_window=WINDOW, reason="Step 1 shows the dialog still open.",
                     missing=["the file is saved"], key_steps=[1])],
    })
    script = Script("wire", [roles] * 6)
    ledger = Ledger()
    async with server_cls(script, api_key=KEY) as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key=KEY, ledger=ledger)
        try:
            verdict = await grade_rollout(make_critic("themis", model), task, rd, durable=False)
        finally:
            await model.aclose()
    script.assert_done()
    assert verdict.reward == 0 and verdict.model == name
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert [(c.milestone.step, c.verdict) for c in record.checks()] == [(1, "failure"), (2, "success")]
    for request in roles.seen["verifier"]:
        step = rd.read_step(asked_step(request))
        assert [i.data for i in images_of(request)] == [rd.read_screenshot(step, "before"),
                                                        rd.read_screenshot(step, "after")]
    assert len(ledger.records) == 6 and all(r.error is None for r in ledger.records)
    assert load_verdict(rd.path, "themis") == verdict
    assert KEY not in (rd.path / "critic-themis.json").read_text()
