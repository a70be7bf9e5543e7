"""Reading model replies exactly or not at all: the rules every role's parser shares.

A reply is untrusted text. Three things are read the same way by every role:

- **Reasoning drafts are removed first** (`strip_reasoning`): ``<think>`` and its kin, a
  closing ``</think>`` whose opening the chat template wrote, gpt-oss's analysis channel.
  A draft often holds the opposite verdict or a quoted format example; it is never read.
- **JSON is read leniently where leniency cannot change the meaning** (`loads`): trailing
  commas, ``//`` and ``/* */`` comments (the papers' own schemas carry them), Python's
  ``True``/``False``/``None``, single-quoted strings, raw newlines inside strings, code
  fences around the object.
- **One answer or none** (`one_object`, `json_chunks`): every top-level object in the reply
  is a candidate, whether it parses or not; a reply with more than one different candidate
  (an example and a real one, a draft and a final) is refused, never resolved by picking
  the one that happens to validate. An echoed template (placeholders such as ``<int>`` or
  ``...``) is not a candidate: it has no values to read. An object cut before its end is
  refused, and nothing nested inside it is taken for the answer.

Every refusal is a `ReplyProblem` whose message is the one line of feedback the caller
sends back when it asks again.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REASONING_TAGS",
    "JsonChunk",
    "ReplyProblem",
    "contract_keys",
    "json_chunks",
    "key_name",
    "loads",
    "one_object",
    "strip_reasoning",
]

#: Tags whose content is a reasoning draft, never the answer. Listed, not guessed.
REASONING_TAGS = ("think", "thinking", "thought", "thoughts", "reasoning", "scratchpad")

#: gpt-oss (harmony format) served without a reasoning parser: the final channel follows.
_HARMONY_FINAL = "<|channel|>final<|message|>"
_HARMONY_END = re.compile(r"<\|(?:end|return|call)\|>\s*$")
#: Kimi-style reasoning markers.
_KIMI = re.compile(r"◁think▷.*?(?:◁/think▷|$)", re.S)


class ReplyProblem(ValueError):
    """A reply that cannot be read exactly; the message is one line of feedback."""


def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<(/?)({names})\b[^<>]*>", re.I)


_REASONING = _tag_pattern(REASONING_TAGS)


def strip_reasoning(text: str, tags: tuple[str, ...] = REASONING_TAGS) -> str:
    """`text` without its reasoning drafts.

    A closed ``<think>…</think>`` is removed; a closing tag with no opening before it
    (the chat template opened it) removes everything before it; an opening that is never
    closed removes everything after it, so a draft cut short is never read as an answer.
    """
    if _HARMONY_FINAL in text:
        text = _HARMONY_END.sub("", text.rsplit(_HARMONY_FINAL, 1)[1])
    text = _KIMI.sub(" ", text)
    pattern = _REASONING if tags == REASONING_TAGS else _tag_pattern(tags)
    out: list[str] = []
    i = 0
    while True:
        m = pattern.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        if m.group(1):  # a closing tag first: its opening came from the template
            out = []
            i = m.end()
            continue
        out.append(text[i:m.start()])
        close = re.compile(rf"</{re.escape(m.group(2))}\s*>", re.I).search(text, m.end())
        if close is None:
            break  # never closed: the rest is draft
        i = close.end()
    return "".join(out)


# -- lenient JSON ------------------------------------------------------------------------------

_BAREWORDS = {"True": "true", "False": "false", "None": "null", "true": "true", "false": "false", "null": "null",
              "NaN": "NaN", "Infinity": "Infinity"}


def _single_quoted(src: str, i: int) -> tuple[str, int]:
    """The JSON form of the single-quoted string opening at `i`, and where it ends."""
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == "'":
            break
        j += 1
    else:
        raise ValueError("a single-quoted string is never closed")
    try:
        value = ast.literal_eval(src[i:j + 1])
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"a single-quoted string does not read ({exc})") from None
    return json.dumps(value, ensure_ascii=False), j + 1


def _normalise(src: str) -> str:
    """`src` with comments, trailing commas, Python words and single quotes made JSON."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif c == "'":
            text, i = _single_quoted(src, i)
            out.append(text)
        elif src.startswith("//", i):
            end = src.find("\n", i)
            i = n if end < 0 else end
        elif src.startswith("/*", i):
            end = src.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == ",":
            j = i + 1
            while j < n:  # a trailing comma: only space and comments before the closer
                if src[j].isspace():
                    j += 1
                elif src.startswith("//", j):
                    end = src.find("\n", j)
                    j = n if end < 0 else end
                elif src.startswith("/*", j):
                    end = src.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                else:
                    break
            if j < n and src[j] in "}]":
                i += 1
            else:
                out.append(c)
                i += 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            word = src[i:j]
            rest = src[j:].lstrip()
            if rest.startswith(":") and word not in _BAREWORDS:
                out.append(json.dumps(word))  # an unquoted key, as JavaScript writes it
            else:
                out.append(_BAREWORDS.get(word, word))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """`text` as JSON, tolerating what cannot change its meaning (see the module docstring);
    `ReplyProblem` with where it breaks otherwise."""
    try:
        return json.loads(text, strict=False)
    except ValueError:
        pass
    try:
        normal = _normalise(text)
        return json.loads(normal, strict=False)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(normal.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise ReplyProblem("the JSON is cut off before its end") from None
        raise ReplyProblem(f"the JSON does not parse ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:
        raise ReplyProblem(f"the JSON does not parse ({exc})") from None


# -- candidates --------------------------------------------------------------------------------

#: A value written as a placeholder of the prompt's template: "<int>", "<what was tested>".
_PLACEHOLDER_VALUE = re.compile(r"^\s*<[^<>]{1,120}>\s*$")
#: Template syntax outside strings: a bare <placeholder>, "..." or "a" | "b" alternatives.
_TEMPLATE_SYNTAX = re.compile(r"""(?:^|[\[:,\s])<[^<>"]{1,120}>|\.\.\.|…|["\w]\s*\|\s*["\w]""")
#: What makes an unparseable chunk look like an attempt at JSON rather than prose braces.
_KEY = re.compile(r"""["'][^"'\n]{1,80}["']\s*:""")


@dataclass(frozen=True, slots=True)
class JsonChunk:
    """One top-level ``{…}`` (or ``[…]``) of a reply."""

    text: str
    start: int
    #: False when the reply ends before the chunk closes (a cut reply).
    closed: bool
    value: Any = None
    #: Why it does not parse; None when it parsed.
    problem: str | None = None
    #: An echoed answer template (placeholders), which is no candidate answer.
    template: bool = False


def _outside_strings(text: str) -> str:
    """`text` with the contents of its double-quoted strings blanked."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def _has_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_PLACEHOLDER_VALUE.match(value))
    if isinstance(value, dict):
        return any(_has_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_placeholder(v) for v in value)
    return False


def _end_of(text: str, start: int, opener: str, closer: str) -> int | None:
    """Index after the chunk opening at `start`; None when it never closes."""
    depth, quote, i = 0, "", start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote or (quote == "'" and c == "\n"):
                quote = ""
        elif c == '"' or (c == "'" and not text[i - 1].isalnum()):
            quote = c
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def json_chunks(text: str, opener: str = "{") -> list[JsonChunk]:
    """The top-level objects (``opener="["``: lists) of `text`, parsed, in order.

    Braces in prose that are no attempt at JSON (no quoted key) are left out; a chunk that
    does not close runs to the end and is returned with ``closed=False``."""
    closer = "}" if opener == "{" else "]"
    found: list[JsonChunk] = []
    i = text.find(opener)
    while i != -1:
        end = _end_of(text, i, opener, closer)
        chunk = text[i:] if end is None else text[i:end]
        bare = _outside_strings(chunk)
        if end is None:
            if _KEY.search(chunk) or (opener == "[" and '"' in chunk):
                found.append(JsonChunk(chunk, i, False, problem="it is cut off before its end",
                                       template=bool(_TEMPLATE_SYNTAX.search(bare))))
            break
        try:
            value = loads(chunk)
        except ReplyProblem as exc:
            if _KEY.search(chunk) or (opener == "[" and chunk.strip("[] \n")):
                found.append(JsonChunk(chunk, i, True, problem=str(exc).removeprefix("the JSON "),
                                       template=bool(_TEMPLATE_SYNTAX.search(bare))))
        else:
            found.append(JsonChunk(chunk, i, True, value=value, template=_has_placeholder(value)))
        i = text.find(opener, end)
    return found


def _distinct(chunks: list[JsonChunk]) -> list[JsonChunk]:
    out: list[JsonChunk] = []
    for c in chunks:
        if c.problem is None and any(o.problem is None and o.value == c.value for o in out):
            continue  # the same answer restated
        out.append(c)
    return out


def one_object(text: str, *, what: str = "JSON object") -> dict[str, Any]:
    """The one JSON object `text` answers with, reasoning drafts removed; `ReplyProblem`
    when it holds none, several different ones, or one that is cut or does not parse."""
    bare = strip_reasoning(text)
    chunks = json_chunks(bare, "{")
    candidates = _distinct([c for c in chunks if not c.template])
    lists = [c for c in json_chunks(bare, "[") if c.problem is None and isinstance(c.value, list)]
    if len(candidates) > 1 and any(c.start < candidates[0].start and c.start + len(c.text) > candidates[-1].start
                                   for c in lists):
        raise ReplyProblem(f"the reply is a JSON list of {len(candidates)} objects; reply with exactly one {what}")
    if not candidates:
        if chunks:
            raise ReplyProblem(f"the reply only repeats the answer template; reply with one {what} holding real values")
        raise ReplyProblem(f"the reply holds no {what}; reply with exactly one")
    if len(candidates) > 1:
        raise ReplyProblem(f"the reply holds {len(candidates)} different JSON objects (an example or a draft besides "
                           f"the answer?); reply with exactly one {what}, the answer")
    only = candidates[0]
    if not only.closed:
        raise ReplyProblem(f"the {what} is cut off before its end; reply with the complete object")
    if only.problem is not None:
        raise ReplyProblem(f"the {what} {only.problem}; fix it and reply with the whole object")
    if not isinstance(only.value, dict):
        raise ReplyProblem(f"the reply holds no {what}; reply with exactly one")
    return only.value


# -- keys of a contract ------------------------------------------------------------------------


def key_name(key: object) -> str:
    """A key as the contracts spell theirs: lower case, spaces and hyphens as ``_``."""
    return "_".join(str(key).strip().strip("*`").lower().replace("-", " ").split())


def contract_keys(data: dict[Any, Any], *, fields: Iterable[str], aliases: Mapping[str, str] | None = None,
                  ignored: Iterable[str] = ()) -> dict[str, Any]:
    """`data` with its keys in the contract's own names, or `ValueError` naming the key.

    Key case and spacing are tolerated (``"Final Decision"``); each alias (another
    vocabulary's name for a field) is listed by the contract; keys in `ignored` are known
    and carry nothing read. Any other key is refused, since it may be a misspelt field or
    an answer under another name, and so is a field given under two names."""
    names = set(fields)
    aliases = dict(aliases or {})
    skip = set(ignored)
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for raw, value in data.items():
        key = key_name(raw)
        if key in skip:
            continue
        field = key if key in names else aliases.get(key)
        if field is None:
            known = sorted(names | set(aliases))
            raise ValueError(f"unknown key {str(raw)!r} (the keys are: {', '.join(known)})")
        if field in out and out[field] != value:
            raise ValueError(f"{given[field]!r} and {str(raw)!r} are two names for one field; give it once")
        out[field] = value
        given[field] = str(raw)
    return out
