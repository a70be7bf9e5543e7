"""The live path over real HTTP: three rollouts narrated as their steps land, then one
MCQ call picks the solver; the official SDKs talk to local protocol servers."""

from __future__ import annotations

import asyncio
import base64

import pytest
from bjudge_helpers import answer_for, fact_from_action, screen

from bjudge import FactCache, JudgeConfig, NarrativeBuilder, make_judge
from core.llm import ChatModel, Ledger, Script
from core.llm.scripted import ScriptRequest
from core.trajectory import PointerEvent, Step
from testing.llm import AnthropicServer, OpenAIServer

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


def _images(body: object) -> list[tuple[tuple[int, int], str | None]]:
    """(size, detail) of every image in an OpenAI chat request body, in order."""
    from core.images import decode_png

    found = []
    for message in body["messages"]:  # type: ignore[index]
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                data = base64.b64decode(url.split(",", 1)[1])
                found.append((decode_png(data).size, part["image_url"].get("detail")))
    return found


async def test_narrative_images_reach_the_server_at_native_size_with_a_change_zoom_for_typing() -> None:
    from PIL import ImageDraw

    from core.images import decode_png, encode_png

    before = screen(3, size=(1920, 1080))
    typed = decode_png(before).convert("RGB")
    ImageDraw.Draw(typed).text((1500, 900), "Total: -1,234.50", fill=(0, 0, 0))  # fine text, far from any pointer
    after = encode_png(typed)
    script = Script("native", [fact_from_action])
    async with OpenAIServer(script, api_key="k-test") as server:
        model = ChatModel.from_name("openai/gpt-4o", base_url=server.base_url, api_key="k-test")
        try:
            builder = NarrativeBuilder(model, FactCache(None))
            step = Step(index=0, action={"kind": "type", "text": "-1,234.50", "note": "Typed the total"},
                        code="pyautogui.write('-1,234.50')")
            found = await builder.add_transition(0, step, before, after)
        finally:
            await model.aclose()
    script.assert_done()
    assert found.facts == ["Typed the total"]
    body = server.requests[0].body
    assert _images(body) == [((1920, 1080), "high"), ((1920, 1080), "high"), ((510, 510), "high")]
    assert "where the screen changed most" in str(body)
