"""The ledger: one `CallRecord` per model call, with totals per module.

Shared by every model of a run (pass it explicitly; there is no global one). With a path
it appends each record to `ledger.jsonl` as it lands, so a killed run keeps every finished
call; opening an existing file loads its records and continues it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import combinations
from pathlib import Path
from typing import overload

from pydantic import BaseModel, ValidationError

from .jsonl import append_line, read_lines, repair_tail
from .records import CallRecord

__all__ = ["INDEXED", "Ledger", "ModuleTotals"]

#: Tags whose combinations `Ledger.dollars` answers without a scan.
INDEXED = frozenset({"run", "task", "rollout"})


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
        self.calls += 1
        self.errors += record.error is not None
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        self.cached_tokens += record.cached_tokens
        self.cache_write_tokens += record.cache_write_tokens
        self.dollars += record.dollars
        self.seconds += record.seconds
        self.retries += record.retries


class Ledger:
    """Append-only list of call records, optionally mirrored to a JSONL file."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._records: list[CallRecord] = []
        self._dollars: dict[tuple[tuple[str, str], ...], float] = {}
        if self.path is not None and self.path.exists():
            self._records = list(_load(self.path))
            repair_tail(self.path)
        for record in self._records:
            self._index(record)

    def __repr__(self) -> str:
        return f"Ledger(path={self.path!s}, records={len(self._records)})"

    def __len__(self) -> int:
        return len(self._records)

    @property
    def records(self) -> Sequence[CallRecord]:
        """Every record so far, oldest first: a read-only view, not a copy (a narrator
        looks for its call's record from the end after every call, on ledgers of a
        benchmark's hundreds of thousands of calls)."""
        return _View(self._records)

    def append(self, record: CallRecord) -> None:
        self._records.append(record)
        self._index(record)
        if self.path is not None:
            append_line(self.path, record.model_dump_json())

    def _index(self, record: CallRecord) -> None:
        """Dollars by every combination of the record's `INDEXED` tags (at most eight)."""
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
        return sum(r.dollars for r in self._records if all(r.tags.get(k) == v for k, v in wanted))

    def totals(self) -> dict[str, ModuleTotals]:
        """Totals per module, in order of first appearance."""
        return _totals(self._records)

    def total(self) -> ModuleTotals:
        """Totals over every call."""
        out = ModuleTotals()
        for record in self._records:
            out.add(record)
        return out

    @staticmethod
    def read(path: Path | str) -> list[CallRecord]:
        """Records of a ledger file, without opening it for writing."""
        return list(Ledger.iter_records(path))

    @staticmethod
    def iter_records(path: Path | str) -> Iterator[CallRecord]:
        """Records of a ledger file one at a time, for readers that only add them up (a
        whole benchmark's ledger holds hundreds of thousands)."""
        return _load(Path(path))


class _View(Sequence[CallRecord]):
    """A read-only window on the ledger's list (a slice is a copy of that slice only)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[CallRecord]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> CallRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[CallRecord]: ...

    def __getitem__(self, index: int | slice) -> CallRecord | Sequence[CallRecord]:
        if isinstance(index, slice):
            return tuple(self._items[index])
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self._items)

    def __reversed__(self) -> Iterator[CallRecord]:
        return reversed(self._items)


def _load(path: Path) -> Iterator[CallRecord]:
    """Every record of a ledger file; one that is not a call record names file and line."""
    for number, raw in enumerate(read_lines(path), start=1):
        try:
            yield CallRecord.model_validate(raw)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            raise ValueError(f"{path}: record {number} is not a model call ({where}: {problem['msg']})") from None


def _totals(records: Iterable[CallRecord]) -> dict[str, ModuleTotals]:
    out: dict[str, ModuleTotals] = {}
    for record in records:
        out.setdefault(record.module, ModuleTotals()).add(record)
    return out
