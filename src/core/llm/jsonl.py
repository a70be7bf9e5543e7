"""Append-only JSONL files that survive a kill mid-write.

Each record is one `os.write` of a whole line on an O_APPEND descriptor, so a crash can
leave at most one incomplete last line; readers skip it and writers cut it off before
appending, so the next record starts on a line of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.atomic import append_line as append_whole_line

__all__ = ["append_line", "read_lines", "repair_tail"]

_log = logging.getLogger(__name__)


def append_line(path: Path, record: dict[str, Any] | str) -> int | None:
    """Append one JSON object (or an already serialised one) as a single write; a write
    that fails part-way (a full disk) is cut back off, see `core.atomic.append_line`.
    Returns the line's byte offset (None when `path` is not a regular file)."""
    text = record if isinstance(record, str) else json.dumps(record, separators=(",", ":"))
    return append_whole_line(path, text.replace("\n", " ").replace("\r", " "), durable=False)


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every complete JSON line; an unterminated or unparsable last line is skipped.

    Streams the file a line at a time (a whole benchmark's ledger runs to hundreds of
    megabytes), holding one line back until it is known not to be the last."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        pending: tuple[int, bytes] | None = None
        number = 0
        for line in fh:
            number += 1
            if not line.endswith(b"\n"):  # only the end of the file lacks one: a torn write
                _log.warning("%s: skipped a torn last line (%d bytes, no newline)", path, len(line))
                break
            if pending is not None:
                yield from _parse(path, *pending, last=False)
            pending = (number, line)
        if pending is not None:
            yield from _parse(path, *pending, last=True)


def _parse(path: Path, number: int, line: bytes, *, last: bool) -> Iterator[dict[str, Any]]:
    if not line.strip():
        return
    try:
        yield json.loads(line)
    except json.JSONDecodeError as exc:
        if not last:
            raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
        _log.warning("%s:%d: skipped a last line that is not JSON", path, number)


def repair_tail(path: Path) -> None:
    """Cut off a torn last line so the next append starts cleanly."""
    if not path.exists():
        return
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(keep)
