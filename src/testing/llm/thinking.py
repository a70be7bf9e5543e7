"""Reasoning the strict servers simulate, so a test sees what real reasoning models do to
the output limit.

Claude 5.x thinks by default (adaptive thinking at the model's default effort) and OpenAI's
reasoning models reason at theirs; the thinking is billed as output and counts against
`max_tokens` / `max_completion_tokens`. The servers spend `SIMULATED_THINKING[effort]`
tokens (or a scripted reply's `thinking_tokens`) before the reply's text; when thinking and
text do not fit the request's limit, the reply is cut there, as the real services cut it
(Claude: `stop_reason: max_tokens`; OpenAI: `finish_reason: length`), with an empty text
when thinking alone used the limit up. A scripted `usage` is taken as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.llm.profiles import Profile
from core.llm.scripted import Reply

__all__ = ["SIMULATED_THINKING", "Thought", "anthropic_thinking_tokens", "openai_reasoning_tokens", "spend"]

#: Tokens a simulated model thinks at each effort before it answers. The real amount varies
#: with the task; these are ordinary amounts for a judging or acting turn.
SIMULATED_THINKING: dict[str, int] = {"none": 0, "minimal": 256, "low": 1024, "medium": 3000, "high": 6000,
                                      "xhigh": 12000, "max": 20000}


@dataclass(frozen=True)
class Thought:
    """The reply as the server sends it after the model thought."""

    text: str
    thinking: int
    text_tokens: int
    cut: bool


def anthropic_thinking_tokens(profile: Profile, body: dict[str, Any], reply: Reply) -> int:
    """Thinking tokens of a Messages request: adaptive at the request's effort (or the
    model's default when it thinks by default and the request says nothing), a budget's
    worth at most with budgeted thinking, none when disabled."""
    found, given = body.get("thinking"), body.get("output_config")
    thinking: dict[str, Any] = found if isinstance(found, dict) else {}
    config: dict[str, Any] = given if isinstance(given, dict) else {}
    kind = thinking.get("type")
    if kind == "disabled" or (kind is None and not profile.thinks_by_default):
        return 0
    if kind == "enabled":
        budget = int(thinking.get("budget_tokens") or 0)
        wanted = reply.thinking_tokens if reply.thinking_tokens is not None else SIMULATED_THINKING["medium"]
        return min(wanted, budget)
    if reply.thinking_tokens is not None:
        return reply.thinking_tokens
    effort = config.get("effort") or profile.default_effort or "high"
    return SIMULATED_THINKING.get(str(effort), SIMULATED_THINKING["high"])


def openai_reasoning_tokens(profile: Profile, body: dict[str, Any], reply: Reply) -> int:
    """Reasoning tokens of a Chat Completions request to a reasoning model."""
    if profile.reasoning != "effort":
        return 0
    effort = body.get("reasoning_effort") or profile.default_effort
    if effort in (None, "none"):
        return 0
    if reply.thinking_tokens is not None:
        return reply.thinking_tokens
    return SIMULATED_THINKING.get(str(effort), SIMULATED_THINKING["medium"])


def spend(text: str, thinking: int, limit: int | None) -> Thought:
    """`text` after `thinking` tokens under an output `limit` (about 4 characters a token)."""
    tokens = math.ceil(len(text) / 4)
    if limit is None or thinking + tokens <= limit:
        return Thought(text, thinking, tokens, cut=False)
    if thinking >= limit:
        return Thought("", limit, 0, cut=True)
    room = limit - thinking
    return Thought(text[: room * 4], thinking, room, cut=True)
