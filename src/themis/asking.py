"""Ask a model for one JSON object, validate it, and re-ask on a bad or failed reply.

Every critic role goes through `ask_json`: the reply's one JSON object (reasoning drafts
removed; a reply with several different objects is refused, never resolved by picking)
must satisfy the role's pydantic schema and then the role's own rules (`check`, e.g.
"that step is the terminating one"). A reply that fails either is shown back
to the model with the reason, so the retry can fix it; a call that fails outright is
repeated as it was, unless its failure is final (a refusal, a spend limit or quota, a
retired model: `core.llm.FINAL_REASONS`). After `retries` extra attempts the role is
reported as failed, with every attempt kept for the record. Where the model's provider
enforces JSON schemas, the role's schema is sent as its reply format (native structured
outputs), so the reply is that one object; it is still read by the same schema and rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from core.llm import FINAL_REASONS, ChatMessage, ChatModel, GenerateConfig, ModelCallError
from core.replies import one_object

from .prompts import render

__all__ = ["MODULE", "Asked", "AttemptRecord", "ask_json", "parse_reply"]

#: Ledger module of every critic call; the role goes in the tags.
MODULE = "critic"

T = TypeVar("T", bound=BaseModel)


class AttemptRecord(BaseModel):
    """One try at a role's call."""

    call_id: str
    """Tag ``call_id`` of the ledger's record of this call."""
    reply: str | None = None
    """The model's text (None when the call itself failed)."""
    error: str | None = None
    """Why the attempt was not accepted; None for the accepted one."""


@dataclass
class Asked(Generic[T]):
    """A role's validated reply, or None with the reason in `error`."""

    value: T | None
    attempts: list[AttemptRecord] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        if self.value is not None or not self.attempts:
            return None
        return self.attempts[-1].error

    @property
    def call_ids(self) -> list[str]:
        return [a.call_id for a in self.attempts]


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "reply"
        message = item["msg"].removeprefix("Value error, ")
        parts.append(message if where == "reply" or not item["loc"] else f"{where}: {message}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_reply(text: str, schema: type[T], check: Callable[[T], list[str]] | None) -> T:
    """The one JSON object in `text`, validated by `schema` and the role's rules.

    Reasoning drafts are removed first; a reply with more than one different object (an
    example, a draft and the answer) is refused rather than resolved by whichever one
    validates (`core.replies.one_object`). ValueError carries the line sent back."""
    obj = one_object(text)
    try:
        value = schema.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(_describe(exc)) from None
    problems = check(value) if check is not None else []
    if problems:
        raise ValueError("; ".join(problems))
    return value


async def ask_json(
    model: ChatModel,
    messages: list[ChatMessage],
    schema: type[T],
    *,
    role: str,
    critic: str,
    retries: int,
    config: GenerateConfig | None = None,
    check: Callable[[T], list[str]] | None = None,
) -> Asked[T]:
    """Up to ``1 + retries`` calls until a reply validates; see the module docstring."""
    asked: Asked[T] = Asked(value=None)
    conversation = list(messages)
    config = model.reply_config(config, schema)
    for _ in range(1 + max(retries, 0)):
        call_id = uuid.uuid4().hex
        tagged = model.with_tags(critic=critic, role=role, call_id=call_id)
        try:
            output = await tagged.generate(conversation, module=MODULE, config=config)
        except ModelCallError as exc:
            asked.attempts.append(AttemptRecord(call_id=call_id, error=f"call failed: {exc}"))
            if exc.reason in FINAL_REASONS:
                break  # asking again cannot help: the model refused, or the account or model cannot serve
            continue
        try:
            value = parse_reply(output.text, schema, check)
        except ValueError as exc:
            reason = str(exc) or "the reply did not validate"
            asked.attempts.append(AttemptRecord(call_id=call_id, reply=output.text, error=reason))
            conversation = [
                *conversation,
                ChatMessage(role="assistant", content=output.text or "(empty reply)"),
                ChatMessage(role="user", content=render("rejected", reason=reason)),
            ]
            continue
        asked.attempts.append(AttemptRecord(call_id=call_id, reply=output.text))
        asked.value = value
        return asked
    return asked
