"""The ledger: one `CallRecord` per model call, with totals per module.

Shared by every model of a run (pass it explicitly; there is no global one). With a path
it appends each record to `ledger.jsonl` as it lands, so a killed run keeps every finished
call; opening an existing file loads its records and continues it.

Memory stays small at a benchmark's scale (hundreds of thousands of calls): records are kept
as their JSON lines (for a ledger with a file, only where each lies in it, see
`ledger_lines`) and decoded when read; the newest stay as objects, since nearly every reader
looks at the end; totals, dollars and the lookups readers need are indexes kept as records land.
"""

from __future__ import annotations

import json
import re
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import combinations
from pathlib import Path
from typing import overload

from pydantic import BaseModel

from .jsonl import repair_tail
from .ledger_lines import LineStore, decode, load
from .records import CallRecord

__all__ = ["INDEXED", "Ledger", "ModuleTotals"]

#: Tags whose combinations `Ledger.dollars` answers without a scan.
INDEXED = frozenset({"run", "task", "rollout"})

#: Newest records kept as objects too (about 2.4 KB each).
TAIL = 1024

#: Tag keys and values that serialise to the same bytes in every JSON writer, so a raw line
#: can be searched for them before it is decoded.
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+\-]*")

_Where = tuple[str, str | None, str | None]

class ModuleTotals(BaseModel):
    """Sums over the calls of one module (or of all of them)."""

    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    dollars: float = 0.0
    seconds: float = 0.0
    retries: int = 0

    def add(self, record: CallRecord) -> None:
        _count(self, record)


class _Running:
    """`ModuleTotals` kept as calls land, in plain slots (a pydantic model's assignments
    cost more than the rest of an append); added up in the same order, so equal to a recount."""

    __slots__ = ("cache_write_tokens", "cached_tokens", "calls", "dollars", "errors", "input_tokens",
                 "output_tokens", "retries", "seconds")

    def __init__(self) -> None:
        self.calls = self.errors = self.input_tokens = self.output_tokens = 0
        self.cached_tokens = self.cache_write_tokens = self.retries = 0
        self.dollars = self.seconds = 0.0

    def add(self, record: CallRecord) -> None:
        _count(self, record)

    def totals(self) -> ModuleTotals:
        return ModuleTotals(**{name: getattr(self, name) for name in self.__slots__})


def _count(into: ModuleTotals | _Running, record: CallRecord) -> None:
    """Add one call to a set of sums (the model's and the ledger's running slots alike)."""
    into.calls += 1
    into.errors += record.error is not None
    into.input_tokens += record.input_tokens
    into.output_tokens += record.output_tokens
    into.cached_tokens += record.cached_tokens
    into.cache_write_tokens += record.cache_write_tokens
    into.dollars += record.dollars
    into.seconds += record.seconds
    into.retries += record.retries


class Ledger:
    """Append-only sequence of call records, optionally mirrored to a JSONL file."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lines = LineStore(self.path)
        #: (index of the first, the newest records as objects); replaced whole, never half-updated.
        self._tail: tuple[int, list[CallRecord]] = (0, [])
        self._dollars: dict[tuple[tuple[str, str], ...], float] = {}
        self._modules: dict[str, _Running] = {}
        self._total = _Running()
        #: Record indices by (module, run tag, task tag).
        self._where: dict[_Where, array[int]] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            for at, size, record in load(self.path):
                self._lines.adopt(at, size)
                self._index(record)
            repair_tail(self.path)
        #: Records from here on were written by this object, canonically (`last` searches their bytes).
        self._mine = len(self._lines)

    def __repr__(self) -> str:
        return f"Ledger(path={self.path!s}, records={len(self)})"

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def records(self) -> Sequence[CallRecord]:
        """Every record so far, oldest first: a read-only view, not a copy (a narrator
        looks for its call's record from the end after every call, on ledgers of a
        benchmark's hundreds of thousands of calls). Reading an old record decodes it."""
        return _View(self)

    def append(self, record: CallRecord) -> None:
        line = record.model_dump_json().encode()
        with self._lock:  # one writer at a time keeps the line, its index and the tail in step
            self._lines.add(line)
            self._index(record)

    def _index(self, record: CallRecord) -> None:
        index = len(self._lines) - 1
        base, tail = self._tail
        tail.append(record)
        if len(tail) >= 2 * TAIL:
            self._tail = (base + TAIL, tail[TAIL:])
        self._modules.setdefault(record.module, _Running()).add(record)
        self._total.add(record)
        key = (record.module, record.tags.get("run"), record.tags.get("task"))
        self._where.setdefault(key, array("I")).append(index)
        # dollars by every combination of the record's `INDEXED` tags (at most eight)
        tags = sorted((k, v) for k, v in record.tags.items() if k in INDEXED)
        for size in range(len(tags) + 1):
            for chosen in combinations(tags, size):
                self._dollars[chosen] = self._dollars.get(chosen, 0.0) + record.dollars

    def dollars(self, **tags: object) -> float:
        """Dollars of the calls whose tags include all of `tags` (a run's, a task's, a
        rollout's spend, asked at every step of every rollout: kept as calls land)."""
        wanted = tuple(sorted((k, str(v)) for k, v in tags.items()))
        if all(k in INDEXED for k, _ in wanted):
            return self._dollars.get(wanted, 0.0)
        return sum(r.dollars for r in self.records if all(r.tags.get(k) == v for k, v in wanted))

    def totals(self) -> dict[str, ModuleTotals]:
        """Totals per module, in order of first appearance (kept as calls land)."""
        return {module: totals.totals() for module, totals in list(self._modules.items())}

    def total(self) -> ModuleTotals:
        """Totals over every call (kept as calls land)."""
        return self._total.totals()

    def calls(self, module: str, **tags: object) -> list[CallRecord]:
        """The calls of `module` whose tags include all of `tags`, oldest first; found by
        module, run and task without decoding the others (a retry loop asks once per task)."""
        wanted = {k: str(v) for k, v in tags.items()}
        keys = [key for key in list(self._where) if key[0] == module
                and ("run" not in wanted or key[1] == wanted["run"])
                and ("task" not in wanted or key[2] == wanted["task"])]
        indices = sorted(i for key in keys for i in self._where[key])
        return [r for r in self._read(indices) if all(r.tags.get(k) == v for k, v in wanted.items())]

    def last(self, **tags: object) -> CallRecord | None:
        """The newest call whose tags include all of `tags`, or None (a caller looking for
        the record of the call it just made: it is nearly always among the newest)."""
        wanted = {k: str(v) for k, v in tags.items()}
        pairs = tuple(wanted.items())

        def fits(record: CallRecord) -> bool:
            return all(record.tags.get(k) == v for k, v in pairs)

        end = len(self)
        base, tail = self._tail
        newest = min(end, base + len(tail))
        if newest < end:  # only while another thread appends
            for record in self._read(range(end - 1, newest - 1, -1)):
                if fits(record):
                    return record
        if len(pairs) == 1:  # the usual question (one call's tag): compared inline, it is asked after every call
            key, value = pairs[0]
            for index in range(newest - 1, base - 1, -1):
                if tail[index - base].tags.get(key) == value:
                    return tail[index - base]
        else:
            for index in range(newest - 1, base - 1, -1):
                if fits(tail[index - base]):
                    return tail[index - base]
        needles = [_needle(k, v) for k, v in wanted.items()]
        older = range(base - 1, -1, -1)
        if all(needles):  # the lines this object wrote: look for the tags' bytes before decoding
            mine, older = range(base - 1, self._mine - 1, -1), range(min(base, self._mine) - 1, -1, -1)
            for index, line in zip(mine, self._lines.lines(mine), strict=True):
                if all(n in line for n in needles if n is not None):
                    record = decode(line, self._where_is(index))
                    if fits(record):
                        return record
        return next((record for record in self._read(older) if fits(record)), None)

    def _where_is(self, index: int) -> str:
        return f"{self.path or 'ledger'}: record {index + 1}"

    def _read_one(self, index: int) -> CallRecord:
        return next(self._read([index]))

    def _read(self, indices: Iterable[int]) -> Iterator[CallRecord]:
        """The records at `indices` (each below len): the newest from memory, the others decoded."""
        base, tail = self._tail
        held = len(tail)
        wanted = list(indices)
        lines = self._lines.lines([i for i in wanted if not 0 <= i - base < held])
        for index in wanted:
            if 0 <= index - base < held:
                yield tail[index - base]
            else:
                yield decode(next(lines), self._where_is(index))

    @staticmethod
    def read(path: Path | str) -> list[CallRecord]:
        """Records of a ledger file, without opening it for writing."""
        return list(Ledger.iter_records(path))

    @staticmethod
    def iter_records(path: Path | str) -> Iterator[CallRecord]:
        """Records of a ledger file one at a time, for readers that only add them up (a
        whole benchmark's ledger holds hundreds of thousands)."""
        return (record for _, _, record in load(Path(path)))


def _needle(key: str, value: str) -> bytes | None:
    """The bytes `"key":"value"` has in a line this ledger wrote, when that is certain."""
    if not (_PLAIN.fullmatch(key) and _PLAIN.fullmatch(value)):
        return None
    return f"{json.dumps(key)}:{json.dumps(value)}".encode()


class _View(Sequence[CallRecord]):
    """A read-only window on the ledger (a slice is a tuple of that slice only)."""

    __slots__ = ("_ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @overload
    def __getitem__(self, index: int) -> CallRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[CallRecord]: ...

    def __getitem__(self, index: int | slice) -> CallRecord | Sequence[CallRecord]:
        size = len(self._ledger)
        if isinstance(index, slice):
            return tuple(self._ledger._read(range(*index.indices(size))))
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("ledger index out of range")
        return self._ledger._read_one(position)

    def __len__(self) -> int:
        return len(self._ledger)

    def __iter__(self) -> Iterator[CallRecord]:
        done = 0
        while done < len(self._ledger):  # live, like a list's iterator: records appended meanwhile are seen
            batch = range(done, min(len(self._ledger), done + TAIL))
            yield from self._ledger._read(batch)
            done = batch.stop

    def __reversed__(self) -> Iterator[CallRecord]:
        return self._backwards(len(self._ledger))  # the length when asked, like a list's

    def _backwards(self, end: int) -> Iterator[CallRecord]:
        while end > 0:
            batch = range(end - 1, max(end - TAIL, 0) - 1, -1)
            yield from self._ledger._read(batch)
            end = batch.stop + 1
