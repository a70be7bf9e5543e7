"""Facts cached by content: re-judging or re-running never regenerates a fact it has.

The key hashes everything that decides a fact: both screenshots' bytes, the action
record, the prompt version, the augmentation settings and the model's name. Entries are
small JSON files, ``<dir>/<key[:2]>/<key>.json``, written atomically, so several
processes may share one cache folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from core.atomic import write_json_atomic

__all__ = ["FactCache", "cache_key"]


def cache_key(*parts: str | bytes | int | float | BaseModel | dict[str, Any] | list[Any] | None) -> str:
    """SHA-256 over the parts, each length-prefixed so no two part lists collide."""
    h = hashlib.sha256()
    for part in parts:
        if part is None:
            data = b"\x00none"
        elif isinstance(part, bytes):
            data = part
        elif isinstance(part, str):
            data = part.encode()
        elif isinstance(part, BaseModel):
            data = part.model_dump_json().encode()
        else:
            data = json.dumps(part, sort_keys=True, ensure_ascii=False, default=str).encode()
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


class FactCache:
    """A folder of cached model answers keyed by `cache_key` (None: memory only)."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"FactCache({str(self.path) if self.path else 'memory'!r})"

    def _file(self, key: str) -> Path:
        assert self.path is not None
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._memory.get(key)
        if found is None and self.path is not None:
            try:
                found = json.loads(self._file(key).read_bytes())
            except (FileNotFoundError, ValueError):
                found = None
            if found is not None:
                self._memory[key] = found
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._memory[key] = value
        if self.path is not None:
            file = self._file(key)
            file.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(file, value, durable=False)
