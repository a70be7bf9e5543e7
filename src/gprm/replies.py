"""Reading the guide model's replies exactly or not at all. Replies are untrusted text: they
are parsed as (lenient) JSON only, never evaluated.

Models answer in many styles (reasoning before the answer, code fences, stray or missing
tags, wrong case, trailing commas, comments); each reader accepts what cannot change the
meaning and raises `ReplyError` with the one line of feedback for a re-ask otherwise.
Reasoning drafts are removed first, and a reply with more than one candidate answer (an
echoed example with values, the previous step's score, a draft) is refused, never resolved
by picking one (`core.replies`). The corpora under tests/gprm/corpus/ hold the styles each
reader is held to.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from core.replies import JsonChunk, ReplyProblem, contract_keys, json_chunks, key_name, strip_reasoning

__all__ = ["ReplyError", "ScoreReply", "json_objects", "parse_list", "parse_score", "parse_summary", "strip_reasoning"]


class ReplyError(ReplyProblem):
    """A reply could not be read; the message is the feedback for a re-ask."""


_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
_NUM = r"-?\d+(?:\.\d+)?"
#: Every way a prose reply states a score (or mentions one): "score: 7", "a score of 10",
#: "scored 9", "rating = 4", "6/10", "6 out of 10". Each match is a candidate; different ones
#: make the reply ambiguous.
_PROSE_SCORES = [
    re.compile(rf"\b(?:score[sd]?|scoring|rat(?:e|ed|ing)|grade[sd]?)\b"
               rf"\**\s*(?:[:=]|is|of|as|at|a|an|to)?\s*(?:a|an|of)?\s*\**\s*({_NUM})(?:\s*(?:/|out\s+of)\s*(\d+))?",
               re.I),
    re.compile(rf"(?<![\w.])({_NUM})\s*(?:/|out\s+of)\s*(\d+)\b", re.I),
]


def json_objects(text: str) -> list[dict[str, Any]]:
    """The top-level JSON objects of `text` that parse (lenient JSON, fences allowed), in
    order; templates and broken chunks left out. For readers that count candidates
    themselves, use `core.replies.json_chunks`."""
    return [c.value for c in json_chunks(text) if c.problem is None and isinstance(c.value, dict)]


def _lower_keys(obj: dict[str, Any]) -> dict[str, Any]:
    return {key_name(k): v for k, v in obj.items()}


class ScoreReply(BaseModel):
    """The scorer's answer: the paper's ``{"score", "original_step"}`` with a reason."""

    model_config = ConfigDict(extra="forbid")
    #: Other names models give the reason; listed, nothing else is accepted.
    ALIASES: ClassVar[dict[str, str]] = {"reasoning": "reason", "rationale": "reason", "explanation": "reason",
                                         "candidate": "original_step", "action": "original_step"}

    score: float
    reason: str = ""
    original_step: str = ""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: object) -> object:
        if isinstance(data, dict):
            return contract_keys(data, fields=cls.model_fields, aliases=cls.ALIASES)
        return data

    @field_validator("score", mode="before")
    @classmethod
    def _number(cls, raw: object) -> object:
        """A number, or a numeric string such as "7", "7/10", "7 out of 10"."""
        if isinstance(raw, bool) or raw is None:
            raise ValueError(f"must be a number from 0 to 10, not {raw!r}")
        if isinstance(raw, str):
            m = re.fullmatch(rf"\s*({_NUM})\s*(?:(?:/|out of)\s*(\d+))?\s*", raw, re.I)
            if m is None:
                raise ValueError(f"must be a number from 0 to 10, not {raw!r}")
            value = _scaled(m[1], m[2])
            if not 0 <= value <= 10:
                raise ValueError(f"must be a number from 0 to 10, not {raw!r}")
            return value
        if isinstance(raw, int | float) and not (math.isfinite(float(raw)) and 0 <= float(raw) <= 10):
            raise ValueError(f"must be a number from 0 to 10, not {raw!r}")
        return raw

    @field_validator("reason", "original_step", mode="before")
    @classmethod
    def _text(cls, raw: object) -> object:
        return "" if raw is None else raw


def _scaled(number: str, scale: str | None, high: float = 10.0) -> float:
    if scale is not None and float(scale) != high:
        raise ReplyError(f"the score is out of {scale}; give it on the 0–{high:g} scale")
    return float(number)


def _score_of(chunk: JsonChunk) -> tuple[float, dict[str, Any]]:
    if not chunk.closed:
        raise ReplyError('the <eval> JSON is cut off before its end; answer again with the whole object')
    if chunk.problem is not None:
        raise ReplyError(f"the <eval> JSON {chunk.problem}")
    try:
        reply = ScoreReply.model_validate(chunk.value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ReplyError(f'"{where}" {message}' if where else message) from None
    return reply.score, {**_lower_keys(chunk.value), "score": reply.score}


def _prose_score(text: str) -> float | None:
    found: list[float] = []
    spans: list[tuple[int, int]] = []
    for pattern in _PROSE_SCORES:
        for m in pattern.finditer(text):
            if any(a <= m.start(1) < b for a, b in spans):
                continue
            spans.append(m.span(1))
            found.append(_scaled(m[1], m[2]))
    if not found:
        return None
    if len(set(found)) > 1:
        listed = ", ".join(f"{s:g}" for s in dict.fromkeys(found))
        raise ReplyError(f"the reply mentions several scores ({listed}); answer with only "
                         '<eval>{"score": N, ...}</eval>')
    score = found[0]
    if not 0 <= score <= 10:
        raise ReplyError(f'"score" must be a number from 0 to 10, not {score:g}')
    return score


def parse_score(text: str, *, action: str | None = None) -> tuple[float, dict[str, Any]]:
    """The score of a reply, and its object (keys lower-cased).

    The answer is the reply's one JSON object (inside ``<eval>`` or not), with a "score"
    (a number, "7", "7/10"); echoed templates (``<number 0-10>``) are no answers. Several
    objects with different scores, an object that is cut or does not parse, or a key
    outside the contract (``{"evaluation": {"score": 6}}``) are refused. Without any object, a prose reply is read only when every score
    it mentions is the same ("Score: 7/10"); "a 10 would need X; I give 6/10" is refused.
    `action` is the candidate scored (kept for the record's sake; the reply must answer
    for it alone)."""
    del action
    text = strip_reasoning(text)
    scored = [c for c in json_chunks(text) if not c.template]
    if scored:
        distinct: list[JsonChunk] = []
        for c in scored:
            if c.problem is None and any(d.problem is None and d.value == c.value for d in distinct):
                continue
            distinct.append(c)
        if len(distinct) == 1:
            return _score_of(distinct[0])
        try:
            readings = [_score_of(c) for c in distinct]
        except ReplyError:
            raise ReplyError(f"the reply holds {len(distinct)} different JSON objects; answer with exactly one "
                             '<eval>{"score": N, ...}</eval>') from None
        values = list(dict.fromkeys(r[0] for r in readings))
        if len(values) > 1:
            listed = ", ".join(f"{v:g}" for v in values)
            raise ReplyError(f"the reply holds several scores ({listed}); answer with exactly one "
                             '<eval>{"score": N, ...}</eval>')
        return readings[-1]
    if any(c.template for c in json_chunks(text)) and _prose_score(re.sub(r"\{[^{}]*\}", " ", text)) is None:
        raise ReplyError('the reply only repeats the answer template; fill in a real "score"')
    score = _prose_score(text)
    if score is None:
        raise ReplyError('the reply holds no score; answer with <eval>{"score": N, ...}</eval>')
    return score, {"score": score}


def parse_list(text: str) -> list[Any]:
    """The one list the reply answers with (JSON or Python syntax, fences allowed); a reply
    with several different lists, or one cut or unparseable, is refused."""
    chunks = [c for c in json_chunks(strip_reasoning(text), "[") if not c.template]
    distinct: list[JsonChunk] = []
    for c in chunks:
        if c.problem is None and any(d.problem is None and d.value == c.value for d in distinct):
            continue
        distinct.append(c)
    if not distinct:
        raise ReplyError("the reply holds no list; answer with the list only")
    if len(distinct) > 1:
        raise ReplyError(f"the reply holds {len(distinct)} different lists; answer with exactly one")
    only = distinct[0]
    if not only.closed:
        raise ReplyError("the list is cut off before its end; answer with the whole list")
    if only.problem is not None:
        raise ReplyError(f"the list {only.problem}")
    if not isinstance(only.value, list):
        raise ReplyError("the reply holds no list; answer with the list only")
    return only.value


_SUMMARY_TAG = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.S | re.I)
_LEAD = re.compile(r"^\s*(?:\*\*|__)?\s*(?:one-sentence\s+)?(?:summary|answer|sentence)\s*(?:\*\*|__)?\s*[:\-–]\s*(?:\*\*|__)?",
                   re.I)
_PREAMBLE = re.compile(r"^\s*(?:sure|okay|ok|certainly|of course|here(?:'s| is)|below is)\b[^.:\n]*[:.!]?\s*$", re.I)
_CLOSING = re.compile(r"^\s*(?:let me know|i hope|hope this|feel free|if you (?:need|want))\b", re.I)
_TAG = re.compile(r"</?[a-zA-Z_][\w-]*>")
_REFUSAL = re.compile(r"^\s*(?:i(?:\s+(?:cannot|can't|can not|am unable|won't)|'m\s+(?:unable|not able))|sorry\b|as an ai\b)",
                      re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
SUMMARY_LIMIT = 1000


def _clean(line: str) -> str:
    line = _BULLET.sub("", line)
    line = _LEAD.sub("", line)
    line = line.strip().strip("*_").strip()
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "\"'“”`":
        line = line[1:-1]
    return line.strip("“”").strip()


def parse_summary(text: str) -> str:
    """The one-sentence summary in a reply: the `<summary>` tag or a "summary" field if
    present, else the last paragraph after any reasoning, with labels ("Summary:"),
    markdown, bullets and quotes removed; bullet lists are joined into one line. Empty
    replies and refusals are unreadable."""
    text = strip_reasoning(text).strip()
    tagged = _SUMMARY_TAG.findall(text)
    if tagged and tagged[-1].strip():
        text = tagged[-1]
    else:
        for obj in reversed(json_objects(text)):
            value = _lower_keys(obj).get("summary")
            if isinstance(value, str) and value.strip():
                text = value
                break
        else:
            fenced = [m[1] for m in _FENCE.finditer(text) if m[1].strip()]
            if fenced:
                text = fenced[-1]
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    paragraphs = [p for p in (_TAG.sub(" ", p).strip() for p in paragraphs)
                  if p and not _PREAMBLE.match(p) and not _CLOSING.match(p)]
    if not paragraphs:
        raise ReplyError("the reply is empty; answer with one sentence that summarises the steps")
    last = paragraphs[-1]
    lines = [_clean(x) for x in last.splitlines()]
    lines = [x for x in lines if x and not _PREAMBLE.match(x)]
    # A label alone on its line ("Summary:") leaves the sentence on the next line.
    sentence = " ".join(x.rstrip(";") if len(lines) > 1 and not x.endswith(".") else x for x in lines)
    sentence = " ".join(sentence.split())
    if len(lines) > 1 and all(_BULLET.match(x) for x in last.splitlines() if x.strip()):
        sentence = "; ".join(x.rstrip(".;") for x in lines) + "."
    if not sentence or not re.search(r"[^\W\d_]", sentence):
        raise ReplyError("the reply holds no sentence; answer with one sentence that summarises the steps")
    if _REFUSAL.match(sentence):
        raise ReplyError("the reply declined; summarise the listed steps in one sentence")
    return sentence[:SUMMARY_LIMIT]
