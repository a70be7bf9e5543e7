"""`replay/<path>`: serve a recording back, with no network at all.

Requests are matched by digest; a request recorded several times gets its replies in the
recorded order. A request with no (or no more) recorded reply fails with `ReplayMissError`.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from .errors import ReplayMissError
from .jsonl import read_lines
from .provider import ModelAPI
from .recorder import request_digest
from .types import ChatMessage, GenerateConfig, ModelOutput

__all__ = ["ReplayAPI"]


class ReplayAPI(ModelAPI):
    provider = "replay"
    default_max_connections = 1024

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, timeout=timeout)
        self.path = Path(model)
        if not self.path.is_file():
            raise ReplayMissError(f"no recording at {self.path}; record one with recorder=Recorder(path)")
        self._replies: dict[str, deque[ModelOutput]] = {}
        for line in read_lines(self.path):
            output = ModelOutput.model_validate(line["output"])
            self._replies.setdefault(line["digest"], deque()).append(output)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        digest = request_digest(messages, config)
        queue = self._replies.get(digest)
        if not queue:
            state = "no more replies" if queue is not None else "no reply"
            raise ReplayMissError(f"{self.path} has {state} for this request (digest {digest[:12]}); "
                                  "the prompt or config changed since recording: record again")
        return queue.popleft()
