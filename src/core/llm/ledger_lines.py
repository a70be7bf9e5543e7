"""Where the ledger keeps its records: as JSON lines, decoded again only when read.

A benchmark's ledger runs to hundreds of thousands of calls (400,557 for OSWorld's 361 tasks x
10 rollouts); as pydantic objects they took 2.4 KB each, about 1 GiB. A ledger with a file
keeps only where each line lies in it (12 bytes a record) and reads lines back with
`os.pread`, many to one read when they lie together; a ledger without a file, or a line that
went to a target that cannot be read back (a FIFO, a sink device), keeps the line's bytes.
"""

from __future__ import annotations

import json
import logging
import os
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from core.atomic import append_line

from .records import CallRecord

__all__ = ["LineStore", "decode", "load"]

_log = logging.getLogger(__name__)

#: Bytes read at once when lines are read back in order (a few hundred records).
_WINDOW = 256 * 1024


class LineStore:
    """An append-only sequence of JSON lines, in a file or held in memory."""

    __slots__ = ("_at", "_held", "_size", "path")

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: Byte offset of each line in `path`, or -1 for a line held in `_held`.
        self._at = array("q")
        self._size = array("I")
        self._held: dict[int, bytes] = {}

    def __len__(self) -> int:
        return len(self._at)

    def add(self, line: bytes) -> None:
        """Append a line (no newline), to the file when there is one."""
        at = append_line(self.path, line, durable=False) if self.path is not None else None
        index = len(self._at)
        if at is None:
            self._held[index] = line
        self._size.append(len(line))
        self._at.append(-1 if at is None else at)  # last: a reader sees the line once it can be read

    def adopt(self, at: int, size: int) -> None:
        """Count a line already in the file (a ledger being continued)."""
        self._size.append(size)
        self._at.append(at)

    def lines(self, indices: Sequence[int]) -> Iterator[bytes]:
        """The lines at `indices` (each < len), from one descriptor; lines that lie near one
        another, in the order asked (up or down), come in one read."""
        fd: int | None = None
        start, window = 0, b""
        try:
            for k, index in enumerate(indices):
                at, size = self._at[index], self._size[index]
                if at < 0:
                    yield self._held[index]
                    continue
                if not (start <= at and at + size < start + len(window)):
                    if fd is None:
                        assert self.path is not None
                        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                    start, end = self._span(indices, k)
                    window = os.pread(fd, end - start, start)
                line = window[at - start:at - start + size + 1]
                if len(line) != size + 1 or line[-1:] != b"\n":
                    raise ValueError(f"{self.path}: record {index + 1} is no longer where the ledger wrote it; "
                                     "the file was changed while its run had it open")
                yield line[:-1]
        finally:
            if fd is not None:
                os.close(fd)

    def _span(self, indices: Sequence[int], k: int) -> tuple[int, int]:
        """Bytes to read for `indices[k]` and the next ones that lie within `_WINDOW` of it."""
        begin = self._at[indices[k]]
        end = begin + self._size[indices[k]] + 1
        for index in indices[k + 1:k + 4096]:
            at = self._at[index]
            if at < 0:
                continue
            low, high = min(begin, at), max(end, at + self._size[index] + 1)
            if high - low > _WINDOW:
                break
            begin, end = low, high
        return begin, end


def decode(line: bytes, where: str = "ledger") -> CallRecord:
    """The record of one line, exactly as it was appended."""
    try:
        return CallRecord.model_validate_json(line)
    except ValidationError as exc:
        problem = exc.errors()[0]
        place = ".".join(str(p) for p in problem["loc"])
        raise ValueError(f"{where} is not a model call ({place}: {problem['msg']})") from None


def load(path: Path) -> Iterator[tuple[int, int, CallRecord]]:
    """(offset, size, record) of every complete line of a ledger file, streamed.

    As `jsonl.read_lines`: a last line without its newline (a torn write) or that is not
    JSON is skipped with a warning; any other line that is not JSON, or a JSON line that is
    not a call record, raises ValueError naming the file and line."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        pending: tuple[int, int, bytes] | None = None
        number = offset = records = 0
        for line in fh:
            number += 1
            at, offset = offset, offset + len(line)
            if not line.endswith(b"\n"):  # only the end of the file lacks one
                _log.warning("%s: skipped a torn last line (%d bytes, no newline)", path, len(line))
                break
            if pending is not None:
                records += _counts(pending[2])
                yield from _parse(path, *pending, records, last=False)
            pending = (number, at, line)
        if pending is not None:
            records += _counts(pending[2])
            yield from _parse(path, *pending, records, last=True)


def _counts(line: bytes) -> int:
    return 1 if line.strip() else 0


def _parse(path: Path, number: int, at: int, line: bytes, record: int, *,
           last: bool) -> Iterator[tuple[int, int, CallRecord]]:
    body = line[:-1]
    if not body.strip():
        return
    try:
        yield at, len(body), CallRecord.model_validate_json(body)
        return
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            problem = exc.errors()[0]
            place = ".".join(str(p) for p in problem["loc"])
            raise ValueError(f"{path}: record {record} is not a model call ({place}: {problem['msg']})") from None
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:  # the standard library's words, as every other log reader says it
        message = exc.msg
    else:  # pragma: no cover - pydantic and json disagree on what JSON is
        message = "pydantic could not read it"
    if not last:
        raise ValueError(f"{path}:{number}: not a JSON line ({message})")
    _log.warning("%s:%d: skipped a last line that is not JSON", path, number)
