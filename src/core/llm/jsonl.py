"""Append-only JSONL files that survive a kill mid-write.

Each record is one `os.write` of a whole line on an O_APPEND descriptor, so a crash can
leave at most one incomplete last line; readers skip it and writers cut it off before
appending, so the next record starts on a line of its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["append_line", "read_lines", "repair_tail"]


def append_line(path: Path, record: dict[str, Any] | str) -> None:
    """Append one JSON object (or an already serialised one) as a single write."""
    text = record if isinstance(record, str) else json.dumps(record, separators=(",", ":"))
    data = (text.replace("\n", " ") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every complete JSON line; an unterminated or unparsable last line is skipped."""
    if not path.exists():
        return
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    complete = lines[:-1]  # the part after the last newline is empty or torn
    for index, line in enumerate(complete):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if index == len(complete) - 1:
                return
            raise


def repair_tail(path: Path) -> None:
    """Cut off a torn last line so the next append starts cleanly."""
    if not path.exists():
        return
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(keep)
