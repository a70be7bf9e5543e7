"""Ask a model for one JSON object, validate it, and re-ask on a bad or failed reply.

Every critic role goes through `ask_json`: the reply's JSON object that satisfies the
role's pydantic schema and then the role's own rules (`check`, e.g. "that step is the
terminating one") is the answer; when several different objects do, the reply is
ambiguous. A reply that fails either is shown back
to the model with the reason, so the retry can fix it; a call that fails outright is
repeated as it was, unless its failure is final (a refusal, a spend limit or quota, a
retired model: `core.llm.FINAL_REASONS`). After `retries` extra attempts the role is
reported as failed, with every attempt kept for the record. Where the model's provider
enforces JSON schemas, the role's schema is sent as its reply format (native structured
outputs), so the reply is that one object; it is still read by the same schema and rules.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from core.llm import FINAL_REASONS, ChatMessage, ChatModel, GenerateConfig, ModelCallError

from .prompts import render

__all__ = ["MODULE", "Asked", "AttemptRecord", "ask_json", "extract_json", "json_objects", "parse_reply"]

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


_PY_WORDS = {"None": "null", "True": "true", "False": "false"}


def _json_words(text: str) -> str:
    """`text` with Python's None/True/False outside strings spelled the JSON way."""
    out: list[str] = []
    i, quote = 0, False
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            quote = ch != '"'
        elif ch == '"':
            quote = True
        elif ch.isalpha() and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_PY_WORDS.get(word, word))
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def json_objects(text: str) -> list[object]:
    """Every top-level JSON object in `text`, in order (code fences, prose and Python-style
    ``None``/``True``/``False`` around or inside them allowed)."""
    decoder = json.JSONDecoder()
    found: list[object] = []
    source = _json_words(text)  # changes nothing in valid JSON: only barewords outside strings
    i = source.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(source, i)
        except json.JSONDecodeError:
            i = source.find("{", i + 1)
            continue
        found.append(obj)
        i = source.find("{", end)
    return found


def extract_json(text: str) -> object:
    """The last top-level JSON object in `text`; ValueError when there is none."""
    found = json_objects(text)
    if not found:
        raise ValueError("the reply holds no JSON object")
    return found[-1]


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:6]:
        where = ".".join(str(p) for p in item["loc"]) or "reply"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_reply(text: str, schema: type[T], check: Callable[[T], list[str]] | None) -> T:
    """The one JSON object in `text` that satisfies `schema` and the role's rules.

    Replies often hold more than the answer: an echo of the format, an example, a draft
    revised later. The answer is the object that validates; several different ones that
    all validate are ambiguous, and ValueError asks for one (so does none, with why)."""
    objects = [o for o in json_objects(text) if isinstance(o, dict)]
    if not objects:
        raise ValueError("the reply holds no JSON object")
    valid: list[T] = []
    reasons: list[str] = []
    for obj in objects:
        try:
            value = schema.model_validate(obj)
        except ValidationError as exc:
            reasons.append(_describe(exc))
            continue
        problems = check(value) if check is not None else []
        if problems:
            reasons.append("; ".join(problems))
            continue
        if all(value != v for v in valid):
            valid.append(value)
    if len(valid) == 1:
        return valid[0]
    if valid:
        raise ValueError(f"the reply holds {len(valid)} different valid JSON answers; give exactly one")
    raise ValueError(reasons[-1])


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
