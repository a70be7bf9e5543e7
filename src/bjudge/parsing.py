"""Reading the narrator's and judges' replies: tagged sections, fact lists, answer indices.

Replies are untrusted text. Nothing here evaluates them; a reply that does not hold exactly
what was asked for yields one line of feedback, which the caller sends back when it re-asks.
Reasoning drafts (``<thoughts>``, ``<think>``, ...) are removed before anything is read: the
prompts ask for them, and models quote the answer format or weigh answers in them. Every
other ``<answer>`` (or ``<facts>``) opening is a candidate: a quoted example before the real
answer, a draft and a final, are refused when they differ, never resolved by picking one. A
section that is never closed is read only when nothing can be missing from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from core.replies import ReplyProblem, contract_keys, json_chunks, loads, strip_reasoning

__all__ = ["AnswerReply", "Choice", "FactsReply", "KeyPointsReply", "parse_choice", "read_facts", "read_items",
           "read_section", "tag_section", "tag_sections"]


class _Contract(BaseModel):
    """A JSON reply (native structured outputs), read by the same parsers as the tagged one."""

    model_config = ConfigDict(extra="forbid")
    ALIASES: ClassVar[dict[str, str]] = {"reasoning": "thoughts", "thought": "thoughts"}

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: object) -> object:
        if isinstance(data, dict):
            return contract_keys(data, fields=cls.model_fields, aliases=cls.ALIASES)
        return data


class AnswerReply(_Contract):
    """A judge's answer as JSON: the reasoning, then one integer (a candidate, or a 1-5 score)."""

    thoughts: str = ""
    answer: int


class FactsReply(_Contract):
    """The narrator's facts as JSON: the reasoning, then one change per item."""

    ALIASES: ClassVar[dict[str, str]] = {**_Contract.ALIASES, "changes": "facts"}
    thoughts: str = ""
    facts: list[str]


class KeyPointsReply(_Contract):
    """WebJudge's key points as JSON."""

    thoughts: str = ""
    key_points: list[str]


def _json_reply(text: str, contract: type[_Contract]) -> _Contract | None:
    """The reply as `contract` when it is one JSON object and nothing else (the structured
    form); None when it is not JSON; `ReplyProblem` when it is JSON the contract refuses."""
    bare = strip_reasoning(text).strip()
    bare = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", bare)
    if not bare.startswith("{"):
        return None
    chunks = json_chunks(bare)
    if len(chunks) != 1 or chunks[0].start != 0 or len(chunks[0].text) != len(bare):
        return None
    if not chunks[0].closed:
        raise ReplyProblem("the JSON reply is cut off before its end")
    if chunks[0].problem is not None:
        raise ReplyProblem(f"the JSON reply {chunks[0].problem}")
    try:
        return contract.model_validate(chunks[0].value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ReplyProblem(f"{where}: {message}" if where else message) from None

_BULLET = re.compile(r"^\s*(?:[-*•‣▪]|\d{1,3}[.)]|\(\d{1,3}\))\s+")
_INT = re.compile(r"(?<![\d.\w])-?\d+(?![\d.]*\d)(?!\w)")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
#: An answer section that only restates the format: "<answer>k</answer>", "<answer>N</answer>",
#: the prompts' own "One integer from 1 to 5." and "The number of the best candidate: ...".
_PLACEHOLDER = re.compile(r"^\s*[`*\"']*(?:[a-zA-Z]|\.\.\.|…|<[^<>]*>|\{[^{}\d]*\}|number|integer|index|your answer|"
                          r"(?:the number of the best candidate:\s*)?one integer from \d+ to \d+\.?)"
                          r"[`*\"']*\s*$", re.I)
#: A list item that only restates the format: "- ...", "- <one change per line>".
_ITEM_PLACEHOLDER = re.compile(r"^\s*(?:\.\.\.|…|<[^<>]*>|one (?:change|requirement) per line)\s*$", re.I)
#: How an answer's body begins (a number, a bullet, a list), as opposed to prose that
#: merely names the tag ("I will answer in <answer> tags").
_ANSWER_START = re.compile(r"^\s*(?:[-*•‣▪\[{`]|\**\s*(?:candidate\s*)?#?-?\d)", re.I)


@dataclass(frozen=True, slots=True)
class Section:
    body: str
    #: False when the section runs to the end of the reply without its closing tag.
    closed: bool


def sections(text: str, name: str) -> list[Section]:
    """Every ``<name>`` section of `text`, in order: each runs to its ``</name>``, or (never
    closed) to the end of the text. An opening followed by another before any closing
    is left out when its text is prose that merely names the tag ("I will list them in
    <facts> tags"); when it begins like an answer (a number, a bullet), it is a section of
    its own, unclosed: an aborted draft is still a candidate."""
    opening = re.compile(rf"<{name}\s*>", re.I)
    closing = re.compile(rf"</{name}\s*>", re.I)
    found: list[Section] = []
    for m in opening.finditer(text):
        nxt = opening.search(text, m.end())
        close = closing.search(text, m.end())
        if close is not None and (nxt is None or close.start() < nxt.start()):
            found.append(Section(text[m.end():close.start()].strip(), True))
        elif nxt is None:
            found.append(Section(text[m.end():].strip(), False))
        elif _ANSWER_START.match(text[m.end():nxt.start()]):
            found.append(Section(text[m.end():nxt.start()].strip(), False))
    return found


def tag_sections(text: str, name: str) -> list[str]:
    """The bodies of `text`'s ``<name>`` sections, for the record (not for reading answers)."""
    return [s.body for s in sections(text, name)]


def tag_section(text: str, name: str) -> str | None:
    """The last ``<name>`` section's body, for the record (thoughts shown in reports)."""
    found = tag_sections(text, name)
    return found[-1] if found else None


def read_section(text: str, name: str) -> str:
    """The one ``<name>`` section the reply answers with (reasoning removed); `ReplyProblem`
    when there is none, several that differ, or one that is never closed."""
    found = [s for s in sections(strip_reasoning(text), name) if (s.body or s.closed) and not _template(s.body)]
    if not found:
        raise ReplyProblem(f"the reply has no <{name}>...</{name}> section")
    if len({s.body for s in found}) > 1:
        raise ReplyProblem(f"the reply has {len(found)} different <{name}> sections (a draft or an example besides "
                           f"the answer?); give exactly one")
    if not found[-1].closed:
        raise ReplyProblem(f"the <{name}> section is never closed (the reply may be cut); end it with </{name}>")
    return found[-1].body


def _template(body: str) -> bool:
    """A section that only restates the format ("- ..."), with no item of its own."""
    items = [_BULLET.sub("", line).strip() for line in body.splitlines() if line.strip()]
    return bool(items) and all(_ITEM_PLACEHOLDER.match(i) for i in items)


def _json_list(body: str, name: str) -> list[str] | None:
    """A JSON array (or ``{"facts": [...]}``) body as strings; None when the body is no JSON."""
    body = _FENCE.sub("", body.strip())
    if not body or body[0] not in "[{":
        return None
    try:
        value = loads(body)
    except ReplyProblem as exc:
        raise ReplyProblem(f"the <{name}> section's {str(exc).removeprefix('the ')}") from None
    if isinstance(value, dict) and len(value) == 1:
        value = value.get("facts", value.get("changes", value.get(name)))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ReplyProblem(f"the <{name}> section holds JSON that is not a list of strings")
    return [v.strip() for v in value if v.strip()]


def _lines(body: str) -> list[str]:
    items: list[str] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _BULLET.match(line) or not items:
            items.append(_BULLET.sub("", line).strip())
        else:
            items[-1] = f"{items[-1]} {line}"  # a wrapped bullet continues
    return [item for item in items if item]


def read_items(text: str, tag: str, *, limit: int = 50) -> list[str]:
    """The list in the reply's one ``<tag>`` section: bullets, numbers or a JSON array; or,
    for ``key_points``, a reply that is one `KeyPointsReply` object."""
    if tag == "key_points" and not sections(strip_reasoning(text), tag):
        reply = _json_reply(text, KeyPointsReply)
        if isinstance(reply, KeyPointsReply):
            return [p.strip() for p in reply.key_points if p.strip()][:limit]
    body = read_section(text, tag)
    found = _json_list(body, tag)
    return (found if found is not None else _lines(body))[:limit]


def read_facts(text: str, *, limit: int = 50) -> list[str]:
    """The facts of a narrator reply: its ``<facts>`` section (the prompt's; ``<answer>``
    is read when the reply has no ``<facts>``), a bullet list or a JSON array; or a reply
    that is only a JSON array or a ``{"facts": [...]}`` object. An empty section means the
    action changed nothing. `ReplyProblem` otherwise, and for a section cut short."""
    bare = strip_reasoning(text)
    for tag in ("facts", "answer"):
        if sections(bare, tag):
            return read_items(text, tag, limit=limit)
    reply = _json_reply(text, FactsReply)
    if isinstance(reply, FactsReply):
        return [f.strip() for f in reply.facts if f.strip()][:limit]
    stripped = bare.strip()
    found = _json_list(stripped, "facts") if stripped[:1] in "[{" or stripped.startswith("```") else None
    if found is None:
        raise ReplyProblem("the reply has no <facts>...</facts> section")
    return found[:limit]


@dataclass(frozen=True, slots=True)
class Choice:
    """A parsed answer: `value` when valid, else the `problem` to tell the model."""

    value: int | None
    problem: str | None = None
    reasoning: str = ""


def parse_choice(text: str, low: int, high: int, *, tag: str = "answer") -> Choice:
    """A single integer in [low, high] from the reply's ``<answer>`` section(s).

    Reasoning drafts are removed first. Sections that only restate the format (``k``,
    ``N``) are not answers; every other section is, and several different integers (in
    one section or across sections, a quoted example before the real answer included) are
    refused as ambiguous rather than guessed between. A section that is never closed is
    read only when its number cannot have been cut (nothing follows a number that could
    have had more digits)."""
    reasoning = tag_section(text, "thoughts") or text.split(f"<{tag}>")[0].strip()
    found = [s for s in sections(strip_reasoning(text), tag) if not _PLACEHOLDER.match(s.body)]
    if not found and tag == "answer":
        try:
            reply = _json_reply(text, AnswerReply)
        except ReplyProblem as exc:
            return Choice(None, str(exc), reasoning)
        if isinstance(reply, AnswerReply):
            if not low <= reply.answer <= high:
                return Choice(None, f"{reply.answer} is out of range: answer an integer from {low} to {high}",
                              reasoning)
            return Choice(reply.answer, None, reply.thoughts or reasoning)
    if not found:
        return Choice(None, f"the reply has no <{tag}>...</{tag}> section", reasoning)
    numbers: list[int] = []
    for s in found:
        ints = [int(m) for m in _INT.findall(s.body)]
        if not ints:
            shown = " ".join(s.body.split())[:60]
            return Choice(None, f"the <{tag}> section holds no integer ({shown!r}); answer with the number", reasoning)
        numbers.extend(ints)
    distinct = sorted(set(numbers))
    if len(distinct) > 1:
        listed = ", ".join(map(str, distinct))
        return Choice(None, f"the reply gives several answers ({listed}); give exactly one <{tag}>", reasoning)
    value = distinct[0]
    last = found[-1]
    if not last.closed and last.body.rstrip("*`. ").endswith(str(value)) and value * 10 <= high:
        return Choice(None, f"the <{tag}> section is never closed, so {value} may be cut short; "
                            f"end it with </{tag}>", reasoning)
    if not low <= value <= high:
        return Choice(None, f"{value} is out of range: answer an integer from {low} to {high}", reasoning)
    return Choice(value, None, reasoning)
