"""The fact generator: one model call per transition, returning what the action changed.

A transition is (before screenshot, step, after screenshot). Done/fail steps get a fixed
fact without a call. Facts are cached by content (see `cache`), so the same transition
is never narrated twice by the same prompt, settings and model. A reply without a
parsable facts section is re-asked a bounded number of times; when the replies never
parse, or the provider cannot be reached, the step is recorded with `error` set and no
facts, and nothing is cached, so a later pass (a rerun, a re-judge) asks again.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from core.llm import ChatMessage, ChatModel, ImagePart, TextPart
from core.replies import ReplyProblem
from core.trajectory import Step

from .augment import AugmentedTransition, FrameMemo, augment, digest
from .cache import FactCache, cache_key
from .calls import ask, thoughts_of
from .config import NarrativeConfig
from .parsing import FactsReply, read_facts
from .prompts import prompt_version, render
from .steps import control_fact, describe_step

__all__ = ["FactGenerator", "TransitionFacts"]

FactStatus = Literal["ok", "no_facts", "error", "control"]
_TEMPLATES = ("narrative_system", "narrative_action", "narrative_closing", "format_retry")
_FORMAT = "Reply with <thoughts>...</thoughts> then <facts>...</facts> holding one change per line."


class TransitionFacts(BaseModel):
    """The facts of one transition and how they were obtained."""

    step: int
    facts: list[str] = Field(default_factory=list)
    status: FactStatus = "ok"
    """``ok``: parsed from the model; ``no_facts``: replies kept failing to parse;
    ``error``: the model could not be reached; ``control``: a done/fail step, no call."""
    thoughts: str = ""
    cached: bool = False
    key: str | None = None
    before_digest: str | None = None
    after_digest: str | None = None
    call_ids: list[str] = Field(default_factory=list)
    dollars: float = 0.0
    problem: str | None = None
    error: str | None = None
    """Why the narrator's calls failed for good (``no_facts`` or ``error``); never cached."""


class FactGenerator:
    """Narrates single transitions with `model` (module tag ``narrative``)."""

    def __init__(self, model: ChatModel, cache: FactCache, cfg: NarrativeConfig | None = None) -> None:
        self.model = model
        self.cache = cache
        self.cfg = cfg or NarrativeConfig()
        self.version = prompt_version(*_TEMPLATES)

    def key(self, step: Step, before_digest: str, after_digest: str) -> str:
        action = step.model_dump(mode="json", include={"action", "code", "pointer", "code_agent"})
        return cache_key("facts", self.version, self.model.name, self.cfg.augment, self.cfg.max_facts,
                         self.cfg.code_output_chars, self.cfg.show_intent, action, before_digest, after_digest)

    async def facts(self, step: Step, before_png: bytes, after_png: bytes | None,
                    memo: FrameMemo | None = None) -> TransitionFacts:
        """The facts of `step`'s transition; `memo` shares decoded screenshots between the
        transitions of one rollout. A step without an after-screenshot (it ended the
        rollout on an error) has no facts unless it is a done/fail step."""
        fixed = control_fact(step)
        if fixed is not None:
            return TransitionFacts(step=step.index, facts=[fixed], status="control")
        if after_png is None:
            return TransitionFacts(step=step.index, status="no_facts", problem="the step has no after-screenshot")
        before_digest, after_digest = await asyncio.to_thread(lambda: (digest(before_png), digest(after_png)))
        key = self.key(step, before_digest, after_digest)
        hit = self.cache.get(key)
        if hit is not None:
            found = TransitionFacts.model_validate({**hit, "step": step.index})
            return found.model_copy(update={"cached": True, "call_ids": [], "dollars": 0.0})
        memo = memo or FrameMemo(self.cfg.augment.longest_side, level=self.cfg.augment.png_level)
        shown = await asyncio.to_thread(self._augment, memo, step, before_png, before_digest, after_png, after_digest)
        result = await self._ask(step, shown)
        result = result.model_copy(update={"key": key, "before_digest": before_digest, "after_digest": after_digest})
        if result.error is None:
            self.cache.put(key, result.model_dump(mode="json", exclude={"cached"}))
        return result

    def _augment(self, memo: FrameMemo, step: Step, before_png: bytes, before_digest: str,
                 after_png: bytes, after_digest: str) -> AugmentedTransition:
        before = memo.get(before_png, known_digest=before_digest)
        after = memo.get(after_png, known_digest=after_digest)
        return augment(before, after, step.pointer, self.cfg.augment)

    def messages(self, step: Step, shown: AugmentedTransition) -> list[ChatMessage]:
        action = describe_step(step, output_chars=self.cfg.code_output_chars, show_intent=self.cfg.show_intent,
                               zoom_on=shown.zoom_on)
        parts: list[TextPart | ImagePart] = [
            TextPart(text="BEFORE the action:"),
            ImagePart(data=shown.before, detail="high"),
            TextPart(text=action.text),
            TextPart(text="AFTER the action:" if shown.zoom is None
                     else "AFTER the action (the outlined rectangle is enlarged below):"),
            ImagePart(data=shown.after, detail="high"),
        ]
        if shown.zoom is not None:
            scale = self.cfg.augment.zoom_scale
            where = "around the pointer" if shown.zoom_on == "pointer" else "where the screen changed most"
            parts += [TextPart(text=f"Enlarged view of the outlined region, {where} (x{scale:g}):"),
                      ImagePart(data=shown.zoom, detail="high")]
        parts.append(TextPart(text=render("narrative_closing", has_session=action.has_session)))
        return [ChatMessage(role="system", content=render("narrative_system"), cache=True),
                ChatMessage(role="user", content=parts)]

    async def _ask(self, step: Step, shown: AugmentedTransition) -> TransitionFacts:
        limit = self.cfg.max_facts

        def parse(text: str) -> tuple[list[str] | None, str | None]:
            try:
                return read_facts(text, limit=limit), None
            except ReplyProblem as exc:
                return None, str(exc)

        asked = await ask(self.model, self.messages(step, shown), module="narrative", parse=parse,
                          instruction=_FORMAT, max_reasks=self.cfg.max_format_retries, config=self.cfg.generate,
                          contract=FactsReply)
        status: FactStatus = "ok" if asked.value is not None else ("error" if asked.error else "no_facts")
        error = None
        if asked.error:
            error = f"the narrator could not be reached: {asked.error}"
        elif asked.value is None:
            error = f"no parsable facts after {asked.attempts} replies: {asked.problem}"
        return TransitionFacts(
            step=step.index,
            facts=asked.value or [],
            status=status,
            thoughts=thoughts_of(asked.reply),
            call_ids=asked.call_ids,
            dollars=asked.dollars,
            problem=asked.error or asked.problem,
            error=error,
        )
