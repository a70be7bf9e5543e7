"""What reaches the user's terminal is the runner's own: no control sequence from a model's
reply or a task file.

A task's instruction, a model's thought or a critic's reason can carry escape sequences that
a terminal obeys: write the clipboard (OSC 52), set the window title, clear the screen,
hyperlink a word, redraw lines. Two walls:

- `strip_controls` removes every control character and escape sequence from a text (tabs and
  newlines stay); `SafeConsole` applies it to everything Rich prints that is not one of
  Rich's own control codes, and drops hyperlinks, so markup or a `Text` made from untrusted
  text cannot reach the terminal as codes;
- `CleanStream`, installed on stdout and stderr by the console script, lets through only the
  codes the runner's own output uses (colours and styles, the live board's cursor moves and
  line erasing, showing and hiding the cursor), so text printed any other way (``typer.echo``
  of a reason) cannot either.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

__all__ = ["CleanStream", "SafeConsole", "strip_controls"]

#: Escape sequences (7-bit and 8-bit forms): strings (OSC, DCS, SOS, PM, APC) up to their
#: terminator or the end, CSI sequences, and two-character escapes.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
_CSI = r"(?:\x1b\[|\x9b)([\x30-\x3f]*)[\x20-\x2f]*([\x40-\x7e])?"
_ESCAPE = re.compile(f"{_STRING}|{_CSI}|\\x1b[\\x20-\\x2f]*[\\x30-\\x7e]?")
#: Control characters other than tab and newline, DEL, C1, and the bidirectional overrides
#: that make text read otherwise than it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Codes the runner's own output uses: SGR styles, cursor up/down/forward/back/column, erase
#: in line, and showing or hiding the cursor (Rich's live display).
_OWN_FINALS = frozenset("mABCDGK")
_OWN_PRIVATE = frozenset({"?25"})


def strip_controls(text: str) -> str:
    """`text` without escape sequences and control characters (tabs and newlines stay)."""
    return _CONTROL.sub("", _ESCAPE.sub("", text))


def _keep_own(match: re.Match[str]) -> str:
    whole = match.group(0)
    if not whole.startswith("\x1b["):
        return ""
    params, final = match.group(1) or "", match.group(2)
    if final is None:
        return ""
    if params.startswith("?"):
        return whole if final in "hl" and params in _OWN_PRIVATE else ""
    return whole if final in _OWN_FINALS and re.fullmatch(r"[0-9;]*", params) else ""


def filter_stream_text(text: str) -> str:
    """What `CleanStream` lets through of `text`: the runner's own codes, no other."""
    kept = _ESCAPE.sub(_keep_own, text)
    # Control characters outside the kept sequences; ESC itself survives only inside them.
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", "", kept)


class SafeConsole(Console):
    """A Rich console that prints no control code it did not make itself (module doc)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Strings lose their sequences before markup and highlighting split them apart."""
        return super().render_str(strip_controls(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_clean_segments(buffer))


def _clean_segments(buffer: Iterable[Segment]) -> Iterator[Segment]:
    for text, style, control in buffer:
        if control:
            yield Segment(text, style, control)
            continue
        if style is not None and style.link:
            style = style.update_link(None)
        yield Segment(strip_controls(text), style, None)


class CleanStream(io.TextIOBase):
    """A text stream that writes `filter_stream_text` of everything to `inner`."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._inner.errors

    def write(self, text: str) -> int:  # type: ignore[override]
        self._inner.write(filter_stream_text(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":  # writing beside the filter is not offered
            raise AttributeError(name)
        return getattr(self._inner, name)
