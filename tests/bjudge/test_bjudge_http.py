"""The live path over real HTTP: three rollouts narrated as their steps land, then one
MCQ call picks the solver; the official SDKs talk to local protocol servers."""

from __future__ import annotations

import asyncio
import base64

import pytest
from bjudge_helpers import answer_for, fact_from_action, screen

from bjudge import FactCache, JudgeConfig, NarrativeBuilder, make_judge
from core.llm import ChatModel, Ledger, Script
from core.llm.fakeserver import AnthropicServer, OpenAIServer
from core.llm.scripted import ScriptRequest
from core.trajectory import PointerEvent, Step

SOLVED = "File report.txt saved"
PLANS = {0: ["Opened the View menu", "Closed the View menu"],
         1: ["Typed the report text", SOLVED],
         2: ["Opened the Help menu"]}


def _route(request: ScriptRequest) -> str:
    system = request.messages[0].text()
    return answer_for(SOLVED)(request) if "impartial judge" in system else fact_from_action(request)


@pytest.mark.parametrize(("server_cls", "name"), [(OpenAIServer, "openai/gpt-4o"),
                                                  (AnthropicServer, "anthropic/claude-haiku-4-5")])
async def test_three_rollouts_narrated_while_running_and_the_judge_picks_the_solver(server_cls, name) -> None:
    calls = sum(len(p) for p in PLANS.values()) + 1
    script = Script("wire", [_route] * calls)
    ledger = Ledger()
    async with server_cls(script, api_key="k-test") as server:
        model = ChatModel.from_name(name, base_url=server.base_url, api_key="k-test", ledger=ledger)
        try:
            builder = NarrativeBuilder(model, FactCache(None))

            async def rollout(k: int) -> None:  # steps land one by one, interleaved across rollouts
                previous = screen(k * 10)
                for i, note in enumerate(PLANS[k]):
                    after = screen(k * 10 + i + 1, size=(1280, 720))
                    step = Step(index=i, action={"kind": "click", "note": note},
                                pointer=[PointerEvent(kind="click", x=100 + i, y=100)])
                    await builder.add_transition(k, step, previous, after)
                    previous = after
                    await asyncio.sleep(0)

            await asyncio.gather(*(rollout(k) for k in PLANS))
            candidates = [await builder.candidate(k) for k in PLANS]
            selection = await make_judge("mcq", model, JudgeConfig(seed=9))("Save the report as report.txt", candidates)
        finally:
            await model.aclose()
    script.assert_done()
    assert selection.chosen == 1
    totals = ledger.totals()
    assert totals["narrative"].calls == calls - 1 and totals["judge"].calls == 1
    assert selection.dollars == pytest.approx(totals["judge"].dollars) and selection.dollars > 0
    # the narrator's images crossed the wire intact: before, after and the zoom crop
    first = server.requests[0].body
    assert str(first).count(base64.b64encode(b"\x89PNG\r\n\x1a\n").decode().rstrip("=")) == 3
