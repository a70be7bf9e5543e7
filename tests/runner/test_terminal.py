"""Model and task text reaches the terminal without its control sequences; the runner's own
codes (colours, the live board's redraws) still work."""

from __future__ import annotations

import io

from rich.live import Live
from rich.markup import escape
from rich.text import Text

from runner.terminal import CleanStream, SafeConsole, filter_stream_text, strip_controls

HOSTILE = (
    "Tidy up\x1b]52;c;SGFja2Vk\x07 the home\x1b]0;pwned-title\x1b\\ folder\x1b[2J\x1bc\x1b[3J"
    "\x9d52;c;eA\x9c\x1b[?1049h\x1b]8;;http://evil\x07link\x1b]8;;\x07\r\x08\x7f\u202eexe.txt\x1b["
)
CODES = ("\x1b]", "\x1b[2J", "\x1bc", "\x1b[3J", "\x9d", "\x1b[?1049", "\r", "\x07", "\x08", "\u202e")


def _clean(out: str) -> bool:
    return not any(code in out for code in CODES)


def test_strip_controls_keeps_the_words_and_nothing_else() -> None:
    out = strip_controls(HOSTILE + "\tend\n")
    assert _clean(out) and "\x1b" not in out
    assert out == "Tidy up the home folderlinkexe.txt\tend\n"


def test_a_safe_console_prints_no_code_from_text_it_was_given() -> None:
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, force_terminal=True, color_system="standard", width=200)
    console.print(f"[bold]task[/bold] {escape(HOSTILE)}")
    console.print(Text(HOSTILE, style="red"))
    console.print("[link=http://evil.example]click[/link] here")  # markup a model could write
    out = buffer.getvalue()
    assert _clean(out) and "evil.example" not in out and "\x1b]8" not in out
    assert "\x1b[1m" in out and "Tidy up the home folder" in out  # its own styles stay
    assert "SGFja2Vk" not in out and "pwned-title" not in out


def test_a_live_board_still_redraws_through_the_filter() -> None:
    raw = io.StringIO()
    stream = CleanStream(raw)  # type: ignore[arg-type]
    stream.isatty = lambda: True  # type: ignore[method-assign]
    console = SafeConsole(file=stream, force_terminal=True, color_system="standard", width=80)
    with Live(Text("first"), console=console, auto_refresh=False) as live:
        live.update(Text("second"), refresh=True)
    out = raw.getvalue()
    assert "second" in out and "\x1b[2K" in out and "\x1b[?25l" in out


def test_the_stream_filter_keeps_only_the_runners_own_codes() -> None:
    own = "\x1b[1;31mred\x1b[0m\x1b[2K\x1b[1A\x1b[?25l\x1b[?25h"
    assert filter_stream_text(own) == own
    out = filter_stream_text(HOSTILE)
    assert not any(code in out for code in CODES if code != "\r")  # carriage returns are the board's
    assert filter_stream_text("a\x1b[6n\x1b[?1h\x1b[H\x1b[10;10Hb") == "ab"  # reports, modes, cursor homing
