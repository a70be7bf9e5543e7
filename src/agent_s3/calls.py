"""One model call as the policy reports it: which module asked, what came back, and the id
that ties it to the ledger (the call is tagged ``call_id=<id>``)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from core.llm import ChatMessage, ChatModel, GenerateConfig

__all__ = ["ModelCall", "call_model"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    id: str
    module: str
    model: str
    text: str
    seconds: float


async def call_model(
    model: ChatModel, messages: list[ChatMessage], *, module: str, config: GenerateConfig | None = None
) -> ModelCall:
    """Generate once; the ledger record carries the returned id in its `call_id` tag."""
    call_id = uuid.uuid4().hex
    started = time.perf_counter()
    out = await model.with_tags(call_id=call_id).generate(messages, module=module, config=config)
    return ModelCall(call_id, module, model.name, out.text, time.perf_counter() - started)
