"""Scripted replies for the guide's tests."""

from __future__ import annotations

import json
from collections.abc import Callable

from core.llm import ScriptRequest


def score_by_action(scores: dict[str, object]) -> Callable[[ScriptRequest], str]:
    """A scoring reply chosen by which candidate action the request is about."""

    def reply(request: ScriptRequest) -> str:
        text = request.messages[-1].text()
        for action, score in scores.items():
            if f"Action: {action}" in text:
                return f'<eval>{{"score": {json.dumps(score)}, "reason": "scripted"}}</eval>'
        raise AssertionError(f"no scripted score for: {text[-300:]}")

    return reply


def route(*names: str, **arguments: object) -> str:
    """A routing reply calling the named tools in order."""
    actions = [{"name": n, "arguments": dict(arguments) if n == "point" else {}} for n in names]
    return json.dumps({"thought": "gather evidence", "actions": actions})
