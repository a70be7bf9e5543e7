"""Turn a model reply into exactly one action of the grammar, or a precise `FormatError`.

The reply must hold one fenced code block with one `agent.<action>(...)` call; reasoning
drafts (``<think>``, ...) are removed first, so a block inside one is never read. The block
is read with `ast.parse` and its arguments with `literals.literal_value`; nothing the model
wrote is ever evaluated. A call whose reading depends on a guess is refused: two different
action blocks, or ``agent.type("quarterly report")``, whose one positional argument is the
element to click (the text to type is missing). Every rejection says what was wrong and what
to write instead, because the message is sent back to the model as feedback.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agent_s3.actions import (
    ACTION_TYPES,
    Action,
    ActionBase,
    TypeText,
    action_adapter,
    action_fields,
    action_name,
    available_on,
)
from agent_s3.literals import NotLiteral, literal_value
from core.protocols import Platform
from core.replies import strip_reasoning

__all__ = ["FormatError", "ParsedReply", "parse_reply"]

DEFAULT_MAX_REPLY = 20_000
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"```[ \t]*(agent\.[^\n`]*)```")
_PY_LANGS = {"", "python", "py", "python3"}
_AGENT_CALL = re.compile(r"\bagent\s*\.")
_BY_NAME: dict[str, type[ActionBase]] = {action_name(c): c for c in ACTION_TYPES}


class FormatError(ValueError):
    """The reply is not one valid action; `str(err)` is feedback for the model."""


@dataclass(frozen=True, slots=True)
class ParsedReply:
    #: The reasoning text around the code block.
    thought: str
    action: Action
    #: The source of the code block as written.
    code: str


def _blocks(reply: str) -> list[tuple[str, str, tuple[int, int]]]:
    found = [(m.group(1).lower(), m.group(2), m.span()) for m in _FENCE.finditer(reply)]
    if not found:
        found = [("", m.group(1), m.span()) for m in _INLINE.finditer(reply)]
    return found


def _signature(cls: type[ActionBase]) -> str:
    return f"agent.{action_name(cls)}({', '.join(action_fields(cls))})"


def _call_of(code: str) -> ast.Call:
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as e:
        raise FormatError(f"The code block is not valid Python ({e.msg}, line {e.lineno}).") from None
    if not tree.body:
        raise FormatError("The code block is empty; put exactly one agent.<action>(...) call in it.")
    if len(tree.body) > 1:
        raise FormatError(
            f"The code block holds {len(tree.body)} statements; write exactly one action per step "
            "and nothing else (no assignments, imports or second actions)."
        )
    stmt = tree.body[0]
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        raise FormatError("The code block must be a single call of the form agent.<action>(...).")
    call = stmt.value
    func = call.func
    if not (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "agent"
    ):
        raise FormatError("Only methods of `agent` can be called, as agent.<action>(...).")
    return call


def _arguments(call: ast.Call, cls: type[ActionBase]) -> dict[str, Any]:
    names = action_fields(cls)
    sig = _signature(cls)
    if len(call.args) > len(names):
        raise FormatError(f"Too many positional arguments: {sig} takes at most {len(names)}.")
    args: dict[str, Any] = {}
    for i, node in enumerate(call.args):
        if isinstance(node, ast.Starred):
            raise FormatError(f"*-unpacking is not allowed in {sig}; write each argument.")
        try:
            args[names[i]] = literal_value(node)
        except NotLiteral as e:
            raise FormatError(f"Argument {names[i]!r} of {sig}: {e}.") from None
    for kw in call.keywords:
        if kw.arg is None:
            raise FormatError(f"**-unpacking is not allowed in {sig}; write each argument.")
        if kw.arg not in names:
            raise FormatError(f"{sig} has no argument {kw.arg!r}.")
        if kw.arg in args:
            raise FormatError(f"Argument {kw.arg!r} of {sig} is given twice.")
        try:
            args[kw.arg] = literal_value(kw.value)
        except NotLiteral as e:
            raise FormatError(f"Argument {kw.arg!r} of {sig}: {e}.") from None
    return args


def _validation_feedback(err: ValidationError, sig: str) -> str:
    parts = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"][1:]) or "arguments"
        if item["type"] == "missing":
            parts.append(f"{where} is required")
        else:
            parts.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return f"Invalid arguments for {sig}: " + "; ".join(parts) + "."


def parse_reply(
    reply: str,
    *,
    platform: Platform = "ubuntu",
    allowed: Collection[str] | None = None,
    max_chars: int = DEFAULT_MAX_REPLY,
) -> ParsedReply:
    """Parse `reply` into one action allowed on `platform`, or raise `FormatError`."""
    if len(reply) > max_chars:
        raise FormatError(f"The reply has {len(reply)} characters; keep it under {max_chars}.")
    answer = strip_reasoning(reply)
    blocks = _blocks(answer)
    if not blocks:
        raise FormatError(
            "No code block found. End your reply with one fenced block such as\n"
            '```python\nagent.click("the Save button", 1, "left")\n```'
        )
    if len(blocks) > 1:
        # Other blocks (quoted text, examples) are ignored when exactly one holds an action.
        with_actions = [b for b in blocks if _AGENT_CALL.search(b[1])]
        if len({b[1].strip() for b in with_actions}) == 1:
            with_actions = with_actions[-1:]  # the same action restated ("to be explicit: ...")
        if len(with_actions) != 1:
            found = (
                f"{len(with_actions)} of them hold agent calls"
                if with_actions
                else "none holds an agent call"
            )
            raise FormatError(
                f"Found {len(blocks)} code blocks and {found}; write exactly one block holding exactly one action."
            )
        blocks = with_actions
    lang, code, span = blocks[0]
    if lang not in _PY_LANGS:
        raise FormatError(f"The action block is marked {lang!r}; mark it ```python.")
    call = _call_of(code)
    name = call.func.attr  # type: ignore[attr-defined]
    names = [
        n for n, c in _BY_NAME.items() if (allowed is None or n in allowed) and available_on(c, platform)
    ]
    if name not in names:
        raise FormatError(f"agent.{name} is not an available action; choose one of: {', '.join(names)}.")
    cls = _BY_NAME[name]
    args = _arguments(call, cls)
    if cls is TypeText and "text" not in args:
        given = f" ({args['element_description']!r} is read as the element to click)" if args.get(
            "element_description") else ""
        raise FormatError(f"agent.type(...) was given no text to type{given}; write "
                          "agent.type(element_description=..., text=\"...\"), or element_description=None to "
                          "type where the focus is.")
    try:
        action = action_adapter.validate_python({"kind": name, **args}, context={"platform": platform})
    except ValidationError as e:
        raise FormatError(_validation_feedback(e, _signature(cls))) from None
    head, _, tail = reply.rpartition(answer[span[0]:span[1]])
    thought = (head + tail).strip()
    return ParsedReply(thought=thought, action=action, code=code.strip())
