"""Dollar prices per million tokens, and the cost of one call's usage.

`Usage.input_tokens` counts every prompt token; cached reads and cache writes are the part
of it billed at their own rates. The default table holds list prices of a few common
models and is meant to be overridden from YAML (`PriceTable.from_yaml`).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from .types import Usage

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable"]


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(frozen=True)
    input: float
    output: float
    #: Input tokens read from the prompt cache; None means the plain input price.
    cached_input: float | None = None
    #: Input tokens written to the prompt cache; None means the plain input price.
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cached = usage.cached_tokens
        written = usage.cache_write_tokens
        plain = max(usage.input_tokens - cached - written, 0)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        total = (plain * self.input + cached * cached_rate + written * write_rate
                 + usage.output_tokens * self.output)
        return total / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "openai/gpt-4o": Price(input=2.5, cached_input=1.25, output=10.0),
    "openai/gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.6),
    "openai/gpt-4.1": Price(input=2.0, cached_input=0.5, output=8.0),
    "openai/gpt-4.1-mini": Price(input=0.4, cached_input=0.1, output=1.6),
    "openai/gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "openai/gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "openai/o3": Price(input=2.0, cached_input=0.5, output=8.0),
    "anthropic/claude-sonnet-4-5": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "anthropic/claude-sonnet-4": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "anthropic/claude-opus-4-1": Price(input=15.0, cached_input=1.5, cache_write=18.75, output=75.0),
    "anthropic/claude-haiku-4-5": Price(input=1.0, cached_input=0.1, cache_write=1.25, output=5.0),
    "gemini/gemini-2.5-pro": Price(input=1.25, cached_input=0.31, output=10.0),
    "gemini/gemini-2.5-flash": Price(input=0.3, cached_input=0.075, output=2.5),
}


class PriceTable:
    """Looks a "provider/model" name up: exact name first, then the longest listed prefix
    (so dated snapshots such as claude-sonnet-4-5-20250929 find their family)."""

    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def from_yaml(cls, path: Path | str, *, include_defaults: bool = True) -> PriceTable:
        """Read `{"provider/model": {input: .., output: .., cached_input: .., cache_write: ..}}`."""
        raw = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a mapping of model name to prices")
        table = cls(None if include_defaults else {})
        table.prices.update({str(k): Price.model_validate(v) for k, v in raw.items()})
        return table

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        best = max((name for name in self.prices if model.startswith(name)), key=len, default=None)
        return self.prices[best] if best else None

    def cost(self, model: str, usage: Usage) -> float:
        """Dollars for `usage`; 0.0 for a model without a price."""
        price = self.lookup(model)
        return price.cost(usage) if price else 0.0
