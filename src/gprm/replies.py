"""Reading the guide model's replies defensively. Replies are untrusted text: they are
parsed as JSON or Python literals only, never evaluated."""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

__all__ = ["ReplyError", "first_json_object", "parse_list", "parse_score"]


class ReplyError(ValueError):
    """A reply could not be read; the message is the feedback for a re-ask."""


_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.S)
_EVAL = re.compile(r"<eval>(.*?)(?:</eval>|$)", re.S | re.I)
_SCORE_FIELD = re.compile(r'"score"\s*:\s*"?(-?\d+(?:\.\d+)?)')


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{...}` in `text` that decodes as a JSON object (fences allowed)."""
    decoder = json.JSONDecoder()
    for source in [m[1] for m in _FENCE.finditer(text)] + [text]:
        for start in [i for i, c in enumerate(source) if c == "{"]:
            try:
                value, _ = decoder.raw_decode(source, start)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def parse_score(text: str, *, low: float = 0.0, high: float = 10.0) -> tuple[float, dict[str, Any]]:
    """The score of an `<eval>{"score": ..., ...}</eval>` reply, and the whole object.

    Tolerates a missing closing tag, code fences and prose around the JSON; the score must
    be a number (or numeric string) in [low, high].
    """
    tagged = _EVAL.findall(text)
    if not tagged:
        raise ReplyError('the reply has no <eval>...</eval> block; answer with <eval>{"score": N, ...}</eval>')
    body = tagged[-1]
    obj = first_json_object(body)
    if obj is None:
        m = _SCORE_FIELD.search(body)
        if m is None:
            raise ReplyError('the <eval> block holds no JSON object with a "score"')
        obj = {"score": m[1]}
    raw = obj.get("score")
    if isinstance(raw, bool):
        raise ReplyError('"score" must be a number from 0 to 10')
    try:
        score = float(raw) if isinstance(raw, int | float | str) else math.nan
    except ValueError:
        score = math.nan
    if not math.isfinite(score) or not low <= score <= high:
        raise ReplyError(f'"score" must be a number from {low:g} to {high:g}, not {raw!r}')
    return score, obj


def parse_list(text: str) -> list[Any]:
    """The first list literal in `text` (JSON or Python syntax, fences allowed)."""
    sources = [m[1] for m in _FENCE.finditer(text)] + [text]
    for source in sources:
        start, end = source.find("["), source.rfind("]")
        if start < 0 or end <= start:
            continue
        chunk = source[start : end + 1]
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(chunk)
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                continue
            if isinstance(value, list):
                return value
    raise ReplyError("the reply holds no list")
