"""Adaptive UI perception: the guide model picks tools to gather evidence about the screen.

A bounded loop: each round shows the goal, recent history, the candidates, the evidence so
far and only the tools not yet used; the reply names tools to run or `terminate`. As in the
paper, at least one tool runs before `terminate` is accepted (it is not even offered on the
first round). A reply that cannot be followed (unreadable, an unknown or repeated tool, an
early terminate) is answered with its problem and asked again once; tool and argument names
models use for the same tools ("omni_parser", "UI Parser", "Point" with `param` or
`description`, ...) are accepted. The loop stops at `max_calls` tool runs, when every tool
has run, on `terminate`, or on a reply still unusable after the re-ask.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.llm import ChatMessage, ChatModel, GenerateConfig, ImagePart, ModelCallError, Part, TextPart
from core.replies import JsonChunk, json_chunks, key_name, strip_reasoning
from gprm.elements import shrink_png
from gprm.history import Candidate
from gprm.prompts import render
from gprm.records import RoutingRecord, ToolUse
from gprm.replies import ReplyError
from gprm.tools import PARSER_TOOL, POINT_TOOL, TOOL_SPECS, Perception

__all__ = ["TERMINATE", "Router", "RoutingReply", "RoutingReplyError", "RoutingRequest", "RoutingResult", "ToolArguments",
           "ToolCall", "canonical_tool", "check_request", "parse_routing"]

TERMINATE = "terminate"
MODULE = "prm"
Stop = Literal["terminate", "cap", "all_tools_used", "repeat", "unknown_tool", "unparseable", "no_action",
              "no_tool", "error"]


@dataclass(slots=True)
class RoutingResult:
    record: RoutingRecord
    images: dict[str, bytes]


class RoutingReplyError(ReplyError):
    """A routing reply that cannot be followed; `kind` is the record's stop reason."""

    def __init__(self, kind: Stop, message: str) -> None:
        super().__init__(message)
        self.kind: Stop = kind


@dataclass(slots=True)
class RoutingReply:
    thought: str | None
    #: (tool, arguments) in the order asked; tool names are canonical when known.
    actions: list[tuple[str, dict[str, Any]]]


#: Names models give the tools (the paper's `omni_parser`/`Point`/`Terminate`, the tool's
#: product name, plain words), keyed by their lower-case letters and digits.
TOOL_NAMES = {
    **dict.fromkeys(["uiparser", "omniparser", "omniparserv2", "omniparsertool", "parser", "screenparser",
                     "parsescreen", "parseui", "uiparse", "globaluiparser", "layoutparser"], PARSER_TOOL),
    **dict.fromkeys(["point", "pointer", "pointtool", "pointat", "molmo", "locate", "ground", "grounding",
                     "findelement", "locateelement"], POINT_TOOL),
    **dict.fromkeys(["terminate", "stop", "done", "finish", "end", "enough"], TERMINATE),
}
#: Argument names that carry the Point tool's description.
TARGET_KEYS = ("target", "description", "query", "param", "element", "text", "label", "object", "instruction",
               "prompt", "desc", "element_description", "target_description", "name")
_ARG_KEYS = ("arguments", "args", "parameters", "params", "input", "kwargs")
_LIST_KEYS = ("actions", "tool_calls", "calls", "tools")
_NAME_KEYS = ("name", "tool", "tool_name", "action", "function")
#: Keys of a request besides the tool list: nothing else may stand beside it.
_REQUEST_KEYS = ("thought", "thoughts", "reasoning")
#: A call of a tool: `point(target="Save")`, `ui_parser()`.
_CALL = re.compile(r"\b([A-Za-z][\w]{0,30})\s*\(\s*(?:(\w+)\s*=\s*)?(?:\"([^\"]*)\"|'([^']*)')?\s*\)")
#: The same, alone on a line (backticks around it allowed).
_CALL_LINE = re.compile(r"^\s*`*\s*" + _CALL.pattern + r"\s*`*\s*$")


def canonical_tool(name: str) -> str:
    """The tool a model's name for it means; unknown names come back lower-cased."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return TOOL_NAMES.get(key, name.strip().lower())


def _arguments(item: dict[str, Any]) -> dict[str, Any]:
    raw: Any = next((item[k] for k in _ARG_KEYS if k in item), None)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {"target": raw}
    args = dict(raw) if isinstance(raw, dict) else {}
    if not args:  # flattened: {"name": "point", "target": "..."}
        args = {k: v for k, v in item.items() if k not in (*_NAME_KEYS, *_ARG_KEYS, "type", "id", "thought")}
    return args


def _with_target(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name != POINT_TOOL or (isinstance(args.get("target"), str) and args["target"].strip()):
        return args
    lowered = {str(k).lower(): v for k, v in args.items()}
    for key in TARGET_KEYS:
        value = lowered.get(key)
        if isinstance(value, str) and value.strip():
            return {**args, "target": value.strip()}
    strings = [v for k, v in lowered.items() if isinstance(v, str) and v.strip() and k != "image"]
    return {**args, "target": strings[0].strip()} if len(strings) == 1 else args


def _item(item: Any) -> tuple[str, dict[str, Any]] | None:
    if isinstance(item, str) and item.strip():
        return canonical_tool(item), {}
    if not isinstance(item, dict):
        return None
    item = {key_name(k): v for k, v in item.items()}
    function = item.get("function")
    if isinstance(function, dict):
        return _item(function)
    for key in _NAME_KEYS:
        value = item.get(key)
        if isinstance(value, dict):
            return _item(value)
        if isinstance(value, str) and value.strip():
            name = canonical_tool(value)
            return name, _with_target(name, _arguments(item))
    return None


def _from_object(obj: dict[str, Any]) -> RoutingReply | None:
    lowered = {key_name(k): v for k, v in obj.items()}
    thought = next((lowered[k] for k in _REQUEST_KEYS if isinstance(lowered.get(k), str)), None)
    lists = [k for k in _LIST_KEYS if k in lowered]
    if lists:
        extra = sorted(set(lowered) - {lists[0], *_REQUEST_KEYS})
        if len(lists) > 1 or extra:
            raise RoutingReplyError("unparseable", f"unknown key {([*lists[1:], *extra])[0]!r} beside "
                                                   f"{lists[0]!r}; answer with only \"thought\" and \"actions\"")
        raw = lowered[lists[0]]
        if isinstance(raw, list):
            items = [_item(x) for x in raw]
            if any(x is None for x in items):
                return None
            return RoutingReply(thought, [x for x in items if x is not None])
        if isinstance(raw, dict):
            one = _item(raw)
            return RoutingReply(thought, [one]) if one is not None else None
        return None
    one = _item(lowered)
    return RoutingReply(thought, [one]) if one is not None else None


def _tool_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments read: the target (its other names already mapped) and terminate's answer
    (the paper's ``ans``)."""
    out = {k: args[k] for k in ("target", "answer") if k in args}
    if "answer" not in out and "ans" in args:
        out["answer"] = args["ans"]
    return {k: (v if v is None or isinstance(v, str) else str(v)) for k, v in out.items()}


class ToolArguments(BaseModel):
    """What a tool is asked: the Point tool's target in words, or terminate's answer. Other
    argument keys (the paper's ``"image": "img_1"``) cannot change what runs and are dropped."""

    model_config = ConfigDict(extra="ignore")
    target: str | None = None
    answer: str | None = None


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    """The tool's canonical name (`canonical_tool`)."""
    arguments: ToolArguments = Field(default_factory=ToolArguments)


class RoutingRequest(BaseModel):
    """The router's JSON contract: a thought, then the tools to run in order. The names and
    shapes models use for the same request (the paper's ``omni_parser`` and ``Point`` with
    ``param``, OpenAI's ``tool_calls``, a single call object) are read into it, as listed in
    `TOOL_NAMES`, `TARGET_KEYS` and the key lists above; any other key beside the tools is
    refused."""

    model_config = ConfigDict(extra="forbid")
    thought: str = ""
    actions: list[ToolCall]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        found = _from_object(data)
        if found is None:
            raise ValueError(f"the JSON object names no tool; answer with {_FORMAT}")
        return {"thought": found.thought or "", "actions": [{"name": name, "arguments": _tool_arguments(args)}
                                                            for name, args in found.actions]}

    def request(self) -> RoutingReply:
        """The (tool, arguments) pairs to run, in order."""
        return RoutingReply(self.thought or None,
                            [(c.name, c.arguments.model_dump(exclude_none=True)) for c in self.actions])


_FORMAT = '{"thought": "...", "actions": [{"name": "<tool>", "arguments": {...}}]}'


def _distinct(chunks: list[JsonChunk]) -> list[JsonChunk]:
    out: list[JsonChunk] = []
    for c in chunks:
        if not any(o.problem is None and c.problem is None and o.value == c.value for o in out):
            out.append(c)
    return out


def parse_routing(text: str) -> RoutingReply:
    """The tools a routing reply asks for: its one JSON request (reasoning drafts removed);
    several different objects (an echoed example and the request, a request and a plan)
    are refused, never resolved by picking one. Without JSON, one call of a known tool
    standing alone on the reply's last line, such as `point(target="Save")`, is the
    request; a call mentioned in prose ("later I will point(target='Save')"), or several
    calls, are none."""
    text = strip_reasoning(text)
    chunks = _distinct([c for c in json_chunks(text) if not c.template])
    if len(chunks) > 1:
        raise RoutingReplyError("unparseable", f"the reply holds {len(chunks)} different JSON objects (an example or a "
                                               f"plan besides the request?); answer with exactly one: {_FORMAT}")
    if chunks:
        only = chunks[0]
        if not only.closed or only.problem is not None:
            why = "is cut off before its end" if not only.closed else only.problem
            raise RoutingReplyError("unparseable", f"the JSON request {why}; answer again with the whole object")
        try:
            return RoutingRequest.model_validate(only.value).request()
        except RoutingReplyError:
            raise
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise RoutingReplyError("unparseable", f"{where}: {message}" if where else message) from None
    calls = [m for m in _CALL.finditer(text) if canonical_tool(m[1]) in (PARSER_TOOL, POINT_TOOL, TERMINATE)]
    lines = [line for line in text.strip().splitlines() if line.strip() and line.strip("` ") not in ("", "python")]
    m = _CALL_LINE.match(lines[-1]) if len(calls) == 1 and lines else None
    if m is not None:
        name = canonical_tool(m[1])
        if name in (PARSER_TOOL, POINT_TOOL, TERMINATE):
            value = m[3] if m[3] is not None else m[4]
            args: dict[str, Any] = {}
            if value is not None:
                args = {"answer": value} if name == TERMINATE else {"target": value}
            return RoutingReply(None, [(name, args)])
    raise RoutingReplyError("unparseable", f"the reply holds no tool request; answer with one JSON object: {_FORMAT}")


@dataclass
class Router:
    """The routing loop. Each round asks for tools; a reply that cannot be followed (no
    request, an unknown or repeated tool, terminating before any tool ran) is answered with
    its problem and asked again `max_reasks` times before the loop stops on it."""

    model: ChatModel
    max_calls: int = 2
    image_side: int | None = 1280
    max_reasks: int = 1
    config: GenerateConfig = field(default_factory=lambda: GenerateConfig.deterministic())

    async def gather(self, goal: str, history: str, candidates: list[Candidate], tools: Perception) -> RoutingResult:
        record = RoutingRecord()
        used: list[str] = []
        screenshot = await asyncio.to_thread(shrink_png, tools.screenshot, self.image_side)
        while True:
            if len(used) >= self.max_calls:
                record.stop = "cap"
                break
            available = [t for t in tools.available() if t not in used]
            if not available:
                record.stop = "all_tools_used"
                break
            drawn = [await asyncio.to_thread(shrink_png, png, self.image_side) for png in tools.images.values() if png]
            messages = self._messages(goal, history, candidates, record.tools, available, screenshot, drawn)
            actions = await self._ask(messages, available, used, record)
            if actions is None or await self._run(actions, used, record, tools):
                break
        return RoutingResult(record, dict(tools.images))

    async def _ask(self, messages: list[ChatMessage], available: list[str], used: list[str],
                   record: RoutingRecord) -> list[tuple[str, dict[str, Any]]] | None:
        """The next request to follow, or None when the loop must stop (recorded)."""
        for attempt in range(self.max_reasks + 1):
            record.calls += 1
            try:
                reply = await self.model.generate(messages, module=MODULE,
                                                  config=self.model.reply_config(self.config, RoutingRequest))
            except ModelCallError as e:
                record.stop = "error"
                record.problem = record.error = f"the routing call failed: {str(e)[:300]}"
                return None
            try:
                parsed = parse_routing(reply.text)
                check_request(parsed.actions, available, used)
            except RoutingReplyError as e:
                if attempt < self.max_reasks:
                    record.reasks += 1
                    messages = [*messages, ChatMessage(role="assistant", content=reply.text[:4000] or "(empty)"),
                                ChatMessage(role="user", content=render("routing_reask", problem=str(e),
                                                                        available=available, first=not used))]
                    continue
                record.stop, record.problem = e.kind, f"{e} (reply: {reply.text.strip()[:200]!r})"
                return None
            if parsed.thought:
                record.thoughts.append(parsed.thought[:1000])
            return parsed.actions
        return None

    async def _run(self, actions: list[tuple[str, dict[str, Any]]], used: list[str],
                   record: RoutingRecord, tools: Perception) -> bool:
        """Run the requested tools in order; True when the loop must stop."""
        for name, args in actions:
            if name == TERMINATE:
                record.stop = "terminate"
                answer = args.get("answer", args.get("ans"))
                record.answer = None if answer is None else str(answer)[:1000]
                return True
            if len(used) >= self.max_calls:
                record.stop = "cap"
                return True
            if name in used:  # a later duplicate inside one reply
                record.stop, record.problem = "repeat", f"refused to call {name} a second time"
                return True
            used.append(name)
            record.tools.append(await tools.run(name, args))
        return False

    def _messages(self, goal: str, history: str, candidates: list[Candidate], calls: list[ToolUse],
                  available: list[str], screenshot: bytes, images: list[bytes]) -> list[ChatMessage]:
        first = not calls
        offered = available if first else [*available, TERMINATE]
        system = render("routing_system", tools=[TOOL_SPECS[t] for t in available], first=first)
        user = render("routing_user", goal=goal, history=history, candidates=candidates, calls=calls,
                      available=offered, first=first)
        parts: list[Part] = [TextPart(text=user), ImagePart(data=screenshot)]
        parts += [ImagePart(data=png) for png in images]
        return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=parts)]


def check_request(actions: list[tuple[str, dict[str, Any]]], available: list[str], used: list[str]) -> None:
    """Raise `RoutingReplyError` unless the request can be followed: at least one action,
    known tools not run before, and a tool before any terminate (the paper: "always ensure
    that at least one tool is used")."""
    if not actions:
        raise RoutingReplyError("no_action", "the reply asks for no tool; call one of: " + ", ".join(available))
    ran = bool(used)
    for name, args in actions:
        if name == TERMINATE:
            if not ran:
                raise RoutingReplyError("no_tool", "call at least one tool before terminate; choose one of: "
                                        + ", ".join(available))
            return
        if name in used:
            raise RoutingReplyError("repeat", f"{name} was already called in this review; call one of: "
                                    + ", ".join([*available, TERMINATE]))
        if name not in available:
            raise RoutingReplyError("unknown_tool", f"no tool named {name!r} is available; call one of: "
                                    + ", ".join(available + ([TERMINATE] if ran else [])))
        if name == POINT_TOOL and not str(args.get("target") or "").strip():
            raise RoutingReplyError("unparseable", 'the point tool needs a "target": the element to find, in words')
        ran = True
