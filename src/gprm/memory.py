"""Dynamic memory: past a threshold, keep the recent relevant steps verbatim and fold the
earlier ones into a one-sentence summary, so the scorer is not lost in a long history.

Retrieval asks the model for the history list with the irrelevant steps blanked. Only a
contiguous run ending at the last step may survive; any other answer (wrong length, a gap,
nothing kept, unreadable) is rejected and the last `fallback_recent` steps are kept
instead. The summary is progressive: it is carried between steps and only the steps newly
pushed out of the recent window are folded into it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.llm import ChatMessage, ChatModel, GenerateConfig, ImagePart, ModelCallError, TextPart
from gprm.contracts import SummaryContract
from gprm.history import HistoryStep, history_lines
from gprm.prompts import render
from gprm.records import MemoryRecord
from gprm.replies import ReplyError, parse_list, parse_summary

__all__ = ["CondensedHistory", "DynamicMemory", "RetrievalReply", "validate_retrieval"]

MODULE = "prm"


class RetrievalReply(BaseModel):
    """The retrieval's JSON contract as an object (structured outputs need one at the root):
    the history list with the early steps blanked. `parse_list` reads its one list, so the
    free-text and the structured reply go through the same checks (`validate_retrieval`)."""

    model_config = ConfigDict(extra="forbid")
    history: list[str]


def validate_retrieval(reply: list[object], n: int) -> int:
    """How many trailing steps a retrieval answer keeps; raises `ReplyError` unless the kept
    entries are a non-empty contiguous suffix of a list of length `n`."""
    if len(reply) != n:
        raise ReplyError(f"the list has {len(reply)} entries, not {n}")
    kept = [isinstance(x, str) and x.strip() != "" for x in reply]
    if any(not isinstance(x, str) for x in reply):
        raise ReplyError("every entry must be a string")
    if not any(kept):
        raise ReplyError("no step was kept")
    first = kept.index(True)
    if not all(kept[first:]):
        raise ReplyError("the kept steps are not one run ending at the last step")
    return n - first


@dataclass(slots=True)
class CondensedHistory:
    """H′: the summary of early steps and the recent steps, with their numbers."""

    summary: str | None
    recent: list[HistoryStep]
    first_recent: int
    record: MemoryRecord

    def lines(self) -> list[str]:
        return history_lines(self.recent, start=self.first_recent)


@dataclass
class DynamicMemory:
    """Per-rollout memory; `condense` is called once per guided step."""

    model: ChatModel
    threshold: int = 5
    fallback_recent: int = 3
    attach_screenshot: bool = True
    max_reasks: int = 1
    config: GenerateConfig = field(default_factory=lambda: GenerateConfig.deterministic())
    _summary: str | None = None
    _summarised: int = 0

    async def condense(self, goal: str, history: list[HistoryStep], screenshot: bytes | None = None) -> CondensedHistory:
        n = len(history)
        if n <= self.threshold:
            record = MemoryRecord(triggered=False, steps=n, kept=list(range(1, n + 1)))
            return CondensedHistory(None, list(history), 1, record)
        calls = 1
        lines = history_lines(history)
        problem: str | None = None
        error: str | None = None
        try:
            reply = await self.model.generate(self._retrieval_messages(goal, lines, screenshot), module=MODULE,
                                              config=self.model.reply_config(self.config, RetrievalReply))
            keep = validate_retrieval(parse_list(reply.text), n)
            how: Literal["model", "fallback"] = "model"
        except ReplyError as e:
            keep, how, problem = min(self.fallback_recent, n), "fallback", str(e)[:500]
        except ModelCallError as e:
            keep, how, problem = min(self.fallback_recent, n), "fallback", str(e)[:500]
            error = f"the retrieval call failed: {problem}"
        early = n - keep
        summary: str | None = None
        if early and early == self._summarised and self._summary:
            summary = self._summary
        elif early:
            base = self._summary if early > self._summarised else None
            start = self._summarised if base else 0
            calls += 1
            try:
                summary = await self._summarise(goal, base, lines[start:early])
                self._summary, self._summarised = summary, early
            except (ModelCallError, ReplyError) as e:
                # The steps that were to be folded in are shown verbatim instead, and folded
                # in again at the next step: nothing is dropped, nothing invented.
                summary, early = base, start
                failed = f"the summary call failed: {str(e)[:300]}"
                error = f"{error}; {failed}" if error else failed
        record = MemoryRecord(triggered=True, steps=n, kept=list(range(early + 1, n + 1)), retrieval=how,
                              retrieval_problem=problem, summary=summary,
                              summarised_upto=early if summary else 0, calls=calls, error=error)
        return CondensedHistory(summary, list(history[early:]), early + 1, record)

    def _retrieval_messages(self, goal: str, lines: list[str], screenshot: bytes | None) -> list[ChatMessage]:
        text = render("memory_retrieve_user", goal=goal, steps=lines, steps_json=json.dumps(lines, ensure_ascii=False))
        parts: list[TextPart | ImagePart] = [TextPart(text=text)]
        if screenshot and self.attach_screenshot:
            parts.append(ImagePart(data=screenshot))
        return [ChatMessage(role="system", content=render("memory_retrieve_system")),
                ChatMessage(role="user", content=list(parts))]

    async def _summarise(self, goal: str, previous: str | None, lines: list[str]) -> str:
        """The progressive summary; an unreadable reply is asked again once, then raises
        `ReplyError` (a failed call raises `ModelCallError`)."""
        messages = [ChatMessage(role="system", content=render("memory_summary_system")),
                    ChatMessage(role="user", content=render("memory_summary_user", goal=goal,
                                                            previous_summary=previous, lines=lines))]
        for attempt in range(self.max_reasks + 1):
            reply = await self.model.generate(messages, module=MODULE,
                                              config=self.model.reply_config(self.config, SummaryContract))
            try:
                return parse_summary(reply.text)
            except ReplyError as e:
                if attempt == self.max_reasks:
                    raise
                messages = [*messages, ChatMessage(role="assistant", content=reply.text[:2000] or "(empty)"),
                            ChatMessage(role="user", content=f"Your reply could not be used: {e}")]
        raise ReplyError("no summary")
