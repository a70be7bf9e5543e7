"""The ledger's unit: one model call, tagged with the module that made it."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["CallRecord"]


class CallRecord(BaseModel):
    """One finished (or finally failed) model call, as written to `ledger.jsonl`."""

    schema_version: int = 1
    #: Unique id of the call.
    id: str
    #: Which part of the system asked: policy, code_agent, reflection, grounding, narrative,
    #: judge, prm, critic, ...
    module: str
    #: "provider/model" as configured.
    model: str
    #: Free-form context such as the run, task and rollout the call belongs to.
    tags: dict[str, str] = Field(default_factory=dict)
    #: Wall-clock start, seconds since the epoch.
    started_at: float
    #: Wall time including retries and waiting for a concurrency slot.
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    #: Cost from the configured price table; 0.0 when the model has no price.
    dollars: float = 0.0
    #: Attempts beyond the first (transient errors, rate limits).
    retries: int = 0
    #: Set when the call finally failed; the error's class and message, secrets removed.
    error: str | None = None
    #: Seconds the call was held by the run's rate budget before going out (`core.llm.rate_budget`).
    paced_seconds: float = 0.0
    #: Attempts the provider refused for its rate limits (HTTP 429).
    refusals: int = 0
    #: Seconds lost to those refusals: from each refused attempt's start to the next attempt.
    refused_seconds: float = 0.0
    #: The failure's kind when it failed (`ModelCallError.reason`): "refusal",
    #: "content_filter", "spend_limit", "quota", "length", "rate_limit", ...
    error_kind: str | None = None
