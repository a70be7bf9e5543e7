"""The model layer: one async `ChatModel` over provider adapters named "provider/model".

Providers: openai, anthropic, vllm, gemini, openrouter (OpenAI-compatible endpoints),
scripted (strict test scripts), replay (a recording). `ChatModel` owns retries, the
per-endpoint concurrency limit, the `Ledger` and recording. What each model accepts is
its `Profile` (`profiles.py`, rules in `model_rules.yaml`). A reply contract is asked as a
`ReplyFormat` (`structured.py`), natively where the model's provider enforces schemas.
"""

from .errors import (
    FINAL_REASONS,
    MalformedReplyError,
    MissingAPIKeyError,
    ModelCallError,
    ModelError,
    RefusalError,
    ReplayMissError,
    ScriptError,
    UnknownProviderError,
)
from .ledger import Ledger, ModuleTotals
from .model import ChatModel
from .prices import Price, PriceTable, price_for, unpriced_models
from .provider import PROVIDERS, ModelAPI, is_scripted
from .recorder import Recorder, request_digest
from .records import CallRecord
from .retry import RetryDecision, RetryPolicy
from .scripted import Reply, Script, ScriptRequest
from .structured import ReplyFormat
from .types import ChatMessage, GenerateConfig, ImagePart, ModelOutput, Part, Sampling, TextPart, Usage

__all__ = [
    "FINAL_REASONS",
    "PROVIDERS",
    "CallRecord",
    "ChatMessage",
    "ChatModel",
    "GenerateConfig",
    "ImagePart",
    "Ledger",
    "MalformedReplyError",
    "MissingAPIKeyError",
    "ModelAPI",
    "ModelCallError",
    "ModelError",
    "ModelOutput",
    "ModuleTotals",
    "Part",
    "Price",
    "PriceTable",
    "Recorder",
    "RefusalError",
    "ReplayMissError",
    "Reply",
    "ReplyFormat",
    "RetryDecision",
    "RetryPolicy",
    "Sampling",
    "Script",
    "ScriptError",
    "ScriptRequest",
    "TextPart",
    "UnknownProviderError",
    "Usage",
    "is_scripted",
    "price_for",
    "request_digest",
    "unpriced_models",
]
