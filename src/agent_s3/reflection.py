"""Reflection before a step: is the trajectory off track, on track, or done?

A separate call (module `reflection`) over the task, the compact history and recent
screens. Its note is shown to the policy; it never proposes actions itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agent_s3.calls import ModelCall, call_model
from agent_s3.facts import platform_name
from agent_s3.history import History
from agent_s3.prompts import render
from core.llm import ChatMessage, ChatModel, GenerateConfig, ImagePart, Part, TextPart
from core.protocols import Platform

__all__ = ["Reflection", "Verdict", "parse_verdict", "reflect"]

Verdict = Literal["off_track", "on_track", "done", "unknown"]
_LABEL = re.compile(r"\b(OFF[-_ ]?TRACK|ON[-_ ]?TRACK|DONE)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reflection:
    verdict: Verdict
    text: str
    call: ModelCall


def parse_verdict(text: str) -> Verdict:
    """The label the reflection starts with (looked for in its first lines), else unknown."""
    m = _LABEL.search(text[:200])
    if m is None:
        return "unknown"
    label = re.sub(r"[-_ ]", "", m.group(1).lower())
    return {"offtrack": "off_track", "ontrack": "on_track", "done": "done"}[label]  # type: ignore[return-value]


async def reflect(
    model: ChatModel,
    *,
    instruction: str,
    history: History,
    screenshot: bytes,
    platform: Platform,
    code_agent: bool,
    config: GenerateConfig | None = None,
) -> Reflection:
    omitted, lines = history.lines()
    parts: list[Part] = [
        TextPart(
            text=render(
                "reflection_user",
                instruction=instruction,
                history=lines,
                omitted=omitted,
                handoff=history.pending_handoff(),
            )
        )
    ]
    parts += [ImagePart(data=png) for _, png in history.recent_screens()]
    parts.append(ImagePart(data=screenshot))
    messages = [
        ChatMessage(
            role="system",
            content=render("reflection_system", platform_name=platform_name(platform), code_agent=code_agent),
            cache=True,
        ),
        ChatMessage(role="user", content=parts),
    ]
    call = await call_model(model, messages, module="reflection", config=config)
    return Reflection(parse_verdict(call.text), call.text.strip(), call)
