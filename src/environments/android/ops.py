"""The operations an Android environment runs: a JSON list of small typed ops, never code.

`compile_android` (agent_s3) emits them, e.g. ``[{"op": "tap", "x": 120, "y": 540}]``; the
environment validates the list here and turns each op into an argument vector for the
device's shell. Every argument is quoted for the device's POSIX `sh` with `shlex.quote`,
so model text can never become shell syntax; `input text` additionally needs spaces
written as ``%s`` (it turns that pair into a space), and so a literal ``%s`` is typed in
two pieces.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "KEYCODES",
    "MAX_OPS",
    "Op",
    "OpError",
    "input_text_argvs",
    "parse_ops",
    "shell_line",
]

MAX_OPS = 64
MAX_TEXT = 5000
Coord = Annotated[int, Field(ge=0, le=20000)]

#: Key names ops may use → Android key codes (android.view.KeyEvent).
KEYCODES: dict[str, str] = {
    "home": "KEYCODE_HOME",
    "back": "KEYCODE_BACK",
    "enter": "KEYCODE_ENTER",
    "backspace": "KEYCODE_DEL",
    "delete": "KEYCODE_FORWARD_DEL",
    "tab": "KEYCODE_TAB",
    "space": "KEYCODE_SPACE",
    "menu": "KEYCODE_MENU",
    "app_switch": "KEYCODE_APP_SWITCH",
    "volumeup": "KEYCODE_VOLUME_UP",
    "volumedown": "KEYCODE_VOLUME_DOWN",
    "power": "KEYCODE_POWER",
    "search": "KEYCODE_SEARCH",
    "esc": "KEYCODE_ESCAPE",
    "up": "KEYCODE_DPAD_UP",
    "down": "KEYCODE_DPAD_DOWN",
    "left": "KEYCODE_DPAD_LEFT",
    "right": "KEYCODE_DPAD_RIGHT",
    "move_home": "KEYCODE_MOVE_HOME",
    "move_end": "KEYCODE_MOVE_END",
    **{c: f"KEYCODE_{c.upper()}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"},
}


class OpError(ValueError):
    """The op list is malformed; the message says what to fix (fed back to the agent)."""


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Tap(_Op):
    op: Literal["tap"]
    x: Coord
    y: Coord


class LongPress(_Op):
    op: Literal["long_press"]
    x: Coord
    y: Coord
    ms: int = Field(default=1000, ge=300, le=10000)


class Swipe(_Op):
    op: Literal["swipe"]
    x1: Coord
    y1: Coord
    x2: Coord
    y2: Coord
    ms: int = Field(default=300, ge=10, le=10000)


class Text(_Op):
    op: Literal["text"]
    text: str = Field(min_length=1, max_length=MAX_TEXT)


class Key(_Op):
    op: Literal["key"]
    key: str

    def code(self) -> str:
        try:
            return KEYCODES[self.key]
        except KeyError:
            raise OpError(f"unknown key {self.key!r}; use one of {', '.join(sorted(KEYCODES))}") from None


class Clear(_Op):
    """Delete the focused field's text: move to its end, then delete characters."""

    op: Literal["clear"]
    chars: int = Field(default=80, ge=1, le=500)


class OpenApp(_Op):
    op: Literal["open"]
    app: str = Field(min_length=1, max_length=200, pattern=r"^[^\n\r\t]+$")


class Wait(_Op):
    op: Literal["wait"]
    seconds: float = Field(gt=0, le=60)


class Unsupported(_Op):
    """An action the policy chose that has no meaning on a phone; running it reports `reason`."""

    op: Literal["unsupported"]
    reason: str = Field(min_length=1, max_length=500)


Op = Annotated[
    Tap | LongPress | Swipe | Text | Key | Clear | OpenApp | Wait | Unsupported, Field(discriminator="op")
]
_LIST: TypeAdapter[list[Op]] = TypeAdapter(list[Op])


def parse_ops(code: str) -> list[Op]:
    """Validate an op list given as JSON text."""
    try:
        data = json.loads(code)
    except json.JSONDecodeError as exc:
        raise OpError(f"Android actions are a JSON list of ops, got unparsable text: {exc.msg}") from None
    if not isinstance(data, list) or not data:
        raise OpError("Android actions are a non-empty JSON list of ops")
    if len(data) > MAX_OPS:
        raise OpError(f"at most {MAX_OPS} ops per action, got {len(data)}")
    try:
        ops = _LIST.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise OpError(f"invalid op at {where}: {first['msg']}") from None
    for op in ops:
        if isinstance(op, Key):
            op.code()
    return ops


def shell_line(argv: list[str]) -> str:
    """One command line for the device's `sh`, every argument quoted."""
    return " ".join(shlex.quote(a) for a in argv)


_CHUNK = 200


def input_text_argvs(text: str) -> list[list[str]]:
    """`input text` / `input keyevent` commands that type `text` exactly.

    Spaces become ``%s``; a literal ``%s`` is split between two commands so it stays
    literal; newlines are Enter key events; long text goes in chunks (`input` is slow with
    very long arguments). Non-ASCII cannot be typed by `input text` and is refused.
    """
    bad = sorted({c for c in text if not (c.isascii() and (c.isprintable() or c in "\n\t"))})
    if bad:
        raise OpError(f"Android's input text types printable ASCII only; cannot type {''.join(bad)[:20]!r}")
    argvs: list[list[str]] = []
    for i, line in enumerate(re.split(r"\n", text)):
        if i:
            argvs.append(["input", "keyevent", "KEYCODE_ENTER"])
        for j, tabbed in enumerate(line.split("\t")):
            if j:
                argvs.append(["input", "keyevent", "KEYCODE_TAB"])
            pieces: list[str] = []
            rest = tabbed
            while "%s" in rest:
                head, rest = rest.split("%s", 1)
                pieces.append(head + "%")
                rest = "s" + rest
            pieces.append(rest)
            for piece in pieces:
                for k in range(0, len(piece), _CHUNK):
                    chunk = piece[k : k + _CHUNK]
                    if chunk:
                        argvs.append(["input", "text", chunk.replace(" ", "%s")])
    return argvs
