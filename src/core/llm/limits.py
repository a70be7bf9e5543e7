"""The output limit of a call that sets none: room for the role's answer and for the
model's reasoning.

Reasoning models spend output tokens on thinking before they answer, and the limit caps
both: Claude 5.x thinks by default (adaptive, at its default effort) and `max_tokens` counts
the thinking; OpenAI's reasoning tokens count against `max_completion_tokens`. A limit sized
for the answer alone is spent on thinking and the reply comes back cut. So a call without a
configured limit gets the role's answer allowance plus the room its effort needs (the
request's effort, else the model's default), within the model's output cap; a cut reply is
asked again with twice the limit (`ChatModel`). A model whose output cap is unknown (a vLLM
server of your own) gets no default where the protocol allows none: its server decides, and
a limit above its context would be refused.
"""

from __future__ import annotations

from .profiles import Profile

__all__ = ["ANSWER_TOKENS", "DEFAULT_ANSWER", "THINKING_ROOM", "default_max_tokens"]

#: Tokens a role's answer may take (its visible text), by ledger module.
ANSWER_TOKENS: dict[str, int] = {
    "policy": 4096,
    "code_agent": 8192,
    "grounding": 1024,
    "reflection": 2048,
    "narrative": 4096,
    "judge": 4096,
    "critic": 4096,
    "prm": 2048,
    "models-check": 256,
}
DEFAULT_ANSWER = 4096
#: Output tokens left for reasoning at each effort (adaptive thinking and OpenAI reasoning
#: take what they need up to the limit; these leave room for a long think at that effort).
THINKING_ROOM: dict[str, int] = {"none": 0, "minimal": 2048, "low": 8192, "medium": 16384, "high": 32768,
                                 "xhigh": 49152, "max": 65536}


def default_max_tokens(profile: Profile, module: str, effort: str | None) -> int | None:
    """The limit a call of `module` sends when none is configured; None: send none.

    Anthropic requires one, so its models always get one; others only where the model's
    output cap is known."""
    if profile.max_output is None and not profile.name.startswith("anthropic/"):
        return None
    answer = ANSWER_TOKENS.get(module, DEFAULT_ANSWER)
    room = 0
    # Budgeted thinking (Claude 4.5) is added on top by the adapter; effort-based and adaptive
    # reasoning share the limit with the answer.
    if profile.reasoning in ("effort", "adaptive", "budget_or_adaptive"):
        chosen = effort if effort is not None else profile.default_effort
        room = THINKING_ROOM.get(chosen or "none", THINKING_ROOM["high"])
    total = answer + room
    return min(total, profile.max_output) if profile.max_output is not None else total
