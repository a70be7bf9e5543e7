"""Scoring one candidate 0–10 with a rubric prompt; the reply is JSON inside <eval> tags.

An unreadable reply is answered with the problem and asked again, at most `max_reasks`
times; if it stays unreadable the candidate gets no score and the replies are recorded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from core.images import decode_png, downscale, draw_marker, encode_png
from core.llm import ChatMessage, ChatModel, GenerateConfig, ImagePart, ModelCallError, Part, TextPart
from gprm.elements import shrink_png
from gprm.history import Candidate
from gprm.prompts import render
from gprm.records import CandidateScore
from gprm.replies import ReplyError, ScoreReply, parse_score

__all__ = ["CALL_FAILED", "ScoreContext", "Scorer"]

MODULE = "prm"
RAW_LIMIT = 4000
#: How a candidate's error starts when its scoring call failed (not merely an unreadable reply).
CALL_FAILED = "the scoring call failed"


@dataclass(slots=True)
class ScoreContext:
    """Everything shared by the candidates of one step."""

    goal: str
    screenshot: bytes
    recent: list[str]
    summary: str | None = None
    evidence: list[str] = field(default_factory=list)
    #: (label, PNG) images the tools drew, sent after the screenshot.
    images: list[tuple[str, bytes]] = field(default_factory=list)
    previous: dict[str, Any] | None = None
    #: The actions the agent may take (its action reference), so "outside the action space" can be judged.
    action_space: str | None = None
    #: The screen's elements as perception listed them, one per line.
    elements: str | None = None
    #: The screenshot and tool images as sent (downscaled once for all candidates); filled
    #: by `Scorer.prepare`.
    sent_screenshot: bytes | None = None
    sent_images: list[bytes] | None = None


@dataclass
class Scorer:
    model: ChatModel
    #: "score" (GUI-PRA's rubric) or "prm" (the standard PRM's prompt).
    prompt: str = "score"
    max_reasks: int = 1
    image_side: int | None = 1280
    config: GenerateConfig = field(default_factory=lambda: GenerateConfig.deterministic())

    def _screen(self, screenshot: bytes, pointer: tuple[int, int] | None) -> bytes:
        img = decode_png(screenshot)
        if pointer is not None:
            img = draw_marker(img, pointer[0], pointer[1], "click", label="Candidate",
                              radius=max(10, round(max(img.size) / 90)))
        small = downscale(img, self.image_side)
        if small is img and pointer is None:
            return screenshot
        return encode_png(small)

    async def prepare(self, ctx: ScoreContext) -> None:
        """Downscale the shared images once, before the candidates are scored."""
        if ctx.sent_screenshot is None:
            ctx.sent_screenshot = await asyncio.to_thread(shrink_png, ctx.screenshot, self.image_side)
        if ctx.sent_images is None:
            ctx.sent_images = [await asyncio.to_thread(shrink_png, png, self.image_side) for _, png in ctx.images]

    async def score(self, index: int, candidate: Candidate, ctx: ScoreContext) -> CandidateScore:
        await self.prepare(ctx)
        assert ctx.sent_screenshot is not None and ctx.sent_images is not None
        if candidate.pointer is None:
            screen = ctx.sent_screenshot
        else:
            screen = await asyncio.to_thread(self._screen, ctx.screenshot, candidate.pointer)
        extras = ctx.sent_images
        user = render(f"{self.prompt}_user", goal=ctx.goal, summary=ctx.summary, recent=ctx.recent,
                      evidence=ctx.evidence, previous=ctx.previous, candidate=candidate,
                      action_space=ctx.action_space, elements=ctx.elements,
                      images=[label for label, _ in ctx.images])
        parts: list[Part] = [TextPart(text=user), ImagePart(data=screen), *(ImagePart(data=p) for p in extras)]
        messages = [ChatMessage(role="system", content=render(f"{self.prompt}_system", previous=ctx.previous),
                                cache=True),
                    ChatMessage(role="user", content=parts)]
        result = CandidateScore(index=index, thought=candidate.thought, action=candidate.action, seed=candidate.seed)
        for attempt in range(self.max_reasks + 1):
            try:
                reply = await self.model.generate(messages, module=MODULE,
                                                  config=self.model.reply_config(self.config, ScoreReply))
            except ModelCallError as e:
                result.attempts, result.error = attempt + 1, f"{CALL_FAILED}: {str(e)[:300]}"
                return result
            result.attempts, result.raw = attempt + 1, reply.text[:RAW_LIMIT]
            try:
                score, obj = parse_score(reply.text, action=candidate.action)
            except ReplyError as e:
                result.error = str(e)
                messages = [*messages, ChatMessage(role="assistant", content=reply.text[:RAW_LIMIT] or "(empty)"),
                            ChatMessage(role="user", content=render("score_reask", problem=str(e)))]
                continue
            result.score, result.error = score, None
            reason = obj.get("reason")
            result.reason = str(reason)[:1000] if reason is not None else None
            return result
        return result
