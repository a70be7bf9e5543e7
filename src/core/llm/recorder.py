"""Record every model call to JSONL, keyed by a digest of the request.

A line holds the request digest, the model, the module, the messages (images replaced by
the sha256 of their bytes, so recordings stay small and hold no screenshots), the config,
and the output with its usage. `replay/<path>` serves such a file back.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .jsonl import append_line, repair_tail
from .types import ChatMessage, GenerateConfig, ImagePart, ModelOutput

__all__ = ["Recorder", "message_records", "request_digest"]


def message_records(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as plain data, each image replaced by its sha256."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for part in message.parts():
            if isinstance(part, ImagePart):
                parts.append({"type": "image", "sha256": hashlib.sha256(part.data).hexdigest(),
                              "media_type": part.media_type, "detail": part.detail})
            else:
                parts.append({"type": "text", "text": part.text})
        out.append({"role": message.role, "content": parts, "cache": message.cache})
    return out


def _config_record(config: GenerateConfig) -> dict[str, Any]:
    return config.model_dump(exclude_none=True)


def request_digest(messages: list[ChatMessage], config: GenerateConfig) -> str:
    """sha256 over the messages (images by hash) and the set config fields."""
    payload = {"messages": message_records(messages), "config": _config_record(config)}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Recorder:
    """Appends one line per successful call to `path`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        self.count = 0

    def __repr__(self) -> str:
        return f"Recorder(path={self.path!s})"

    def record(self, *, model: str, module: str, messages: list[ChatMessage],
               config: GenerateConfig, output: ModelOutput) -> None:
        line = {
            "digest": request_digest(messages, config),
            "model": model,
            "module": module,
            "messages": message_records(messages),
            "config": _config_record(config),
            "output": output.model_dump(mode="json"),
        }
        append_line(self.path, line)
        self.count += 1
