"""One comparative question: candidates in a given order, one validated index back.

Shared by the MCQ judge (all candidates at once) and the pairwise tournament (two at a
time), so both see the same prompt and differ only in what they compare.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.llm import ChatMessage, ChatModel, Part, TextPart

from .calls import Asked, ask
from .candidates import Candidate
from .config import JudgeConfig
from .parsing import AnswerReply, parse_choice
from .prompts import render

__all__ = ["compare", "comparison_messages"]


def comparison_messages(task: str, shown: Sequence[Candidate], cfg: JudgeConfig) -> list[ChatMessage]:
    """System prompt with the request, then every candidate under its shown number."""
    n = len(shown)
    parts: list[Part] = []
    for position, candidate in enumerate(shown, start=1):
        parts.append(TextPart(text=f"===== Candidate {position} ====="))
        parts.extend(candidate.parts)
    parts.append(TextPart(text=render("judge_closing", n=n)))
    kinds = {c.representation for c in shown}
    representation = kinds.pop() if len(kinds) == 1 else "mixed"
    system = render("judge_system", n=n, task=task, cite=cfg.cite, representation=representation)
    return [ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=parts)]


async def compare(model: ChatModel, task: str, shown: Sequence[Candidate], cfg: JudgeConfig) -> Asked[int]:
    """Ask which of `shown` is best; `value` is a 1-based shown position, or None after
    the bounded re-asks (or when the model could not be reached)."""
    n = len(shown)

    def parse(text: str) -> tuple[int | None, str | None]:
        choice = parse_choice(text, 1, n)
        return choice.value, choice.problem

    return await ask(model, comparison_messages(task, shown, cfg), module="judge", parse=parse,
                     instruction=f"End your reply with <answer>k</answer>, k one integer from 1 to {n}.",
                     max_reasks=cfg.max_reasks, config=cfg.generate, contract=AnswerReply)
