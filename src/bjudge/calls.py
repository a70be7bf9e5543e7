"""One question to a model with bounded re-asks, and the ledger records it cost.

Every judge and the narrator ask the same way: send, parse, and when the reply cannot be
used, show the model its reply and what was wrong, at most `max_reasks` times. A call
that finally fails at the provider (after `ChatModel`'s own retries: a refusal, a spend
limit, a cut reply, ...) ends the question with `error` set; nothing is guessed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import BaseModel

from core.llm import CallRecord, ChatMessage, ChatModel, GenerateConfig, ModelCallError

from .parsing import tag_section
from .prompts import render

__all__ = ["Asked", "ask", "cost_of", "thoughts_of"]

T = TypeVar("T")

#: Ledger tag that ties a record to one call made here.
CALL_TAG = "bjudge_call"


@dataclass
class Asked(Generic[T]):
    """The outcome of a question: a parsed value, or why there is none."""

    value: T | None = None
    reply: str = ""
    problem: str | None = None
    """Why the last reply could not be used (format), if it could not."""
    error: str | None = None
    """Why the model could not be reached, if it could not."""
    attempts: int = 0
    call_ids: list[str] = field(default_factory=list)
    dollars: float = 0.0
    replies: list[str] = field(default_factory=list)


def _record(model: ChatModel, tag: str) -> CallRecord | None:
    if model.ledger is None:
        return None
    return model.ledger.last(**{CALL_TAG: tag})


async def ask(
    model: ChatModel,
    messages: list[ChatMessage],
    *,
    module: str,
    parse: Callable[[str], tuple[T | None, str | None]],
    instruction: str,
    max_reasks: int,
    config: GenerateConfig | None = None,
    contract: type[BaseModel] | None = None,
) -> Asked[T]:
    """Ask until `parse` returns a value (it returns ``(value, None)`` or ``(None, problem)``).

    With a `contract` (the JSON form of the answer `parse` also reads), a model whose
    provider enforces JSON schemas is asked in it: native structured outputs."""
    out: Asked[T] = Asked()
    history = list(messages)
    if contract is not None:
        config = model.reply_config(config, contract)
    for attempt in range(max_reasks + 1):
        tag = uuid.uuid4().hex
        out.attempts = attempt + 1
        try:
            reply = await model.with_tags(**{CALL_TAG: tag}).generate(history, module=module, config=config)
        except ModelCallError as exc:
            out.error = str(exc)
            _account(out, _record(model, tag))
            return out
        _account(out, _record(model, tag))
        out.reply = reply.text
        out.replies.append(reply.text)
        value, problem = parse(reply.text)
        if problem is None:
            out.value, out.problem = value, None
            return out
        out.problem = problem
        history += [
            ChatMessage(role="assistant", content=reply.text or "(empty reply)"),
            ChatMessage(role="user", content=render("format_retry", problem=problem, instruction=instruction)),
        ]
    return out


def _account(out: Asked[T], record: CallRecord | None) -> None:
    if record is not None:
        out.call_ids.append(record.id)
        out.dollars += record.dollars


def cost_of(asked: list[Asked[T]]) -> tuple[list[str], float]:
    """All call ids and dollars over several questions."""
    ids = [i for a in asked for i in a.call_ids]
    return ids, sum(a.dollars for a in asked)


def thoughts_of(reply: str) -> str:
    """The reasoning of a judge's or narrator's reply: the ``thoughts`` field of a structured
    (JSON) one, else its ``<thoughts>`` section; empty when it has none."""
    try:
        value = json.loads(reply)
    except ValueError:
        return tag_section(reply, "thoughts") or ""
    found = value.get("thoughts") if isinstance(value, dict) else None
    return found if isinstance(found, str) else ""
