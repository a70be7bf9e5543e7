"""Dollar prices per million tokens, and the cost of one call's usage.

Prices come from the `genai-prices` package (maintained price data of OpenAI, Anthropic,
Google, OpenRouter and others, bundled with the package: no network at run time), looked
up by the provider part of our "provider/model" name. The package's own matching rules
decide which names a price covers (dated snapshots of a model, for instance); we never guess
by prefix, so `gpt-5-nano` is never charged `gpt-5`'s price. A per-model override
(`PriceTable({"vllm/qwen": Price(...)})`, or `prices:` in the run configuration) wins.
Self-hosted (`vllm/`) and test (`scripted/`, `replay/`) models have no price of their own;
a simulated model (`sim/openai/gpt-5`) costs what the model it stands for costs.

`Usage.input_tokens` counts every prompt token; cached reads and cache writes are the part
of it billed at their own rates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import genai_prices
import yaml
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import ModelInfo, TieredPrices
from pydantic import BaseModel, ConfigDict

from .provider import is_scripted, split_name
from .types import Usage

__all__ = [
    "GENAI_PROVIDERS",
    "Price",
    "PriceTable",
    "price_for",
    "unpriced_models",
]

#: Our provider name -> genai-prices' provider id. Providers not listed (vllm: a server of
#: your own; scripted and replay: tests) have no list price; give one in `prices:`.
GENAI_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "openrouter": "openrouter",
}


#: The provider of simulated models, priced as the real model they stand for.
SIMULATED = "sim"


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    input: float
    """Dollars per million input tokens."""
    output: float
    """Dollars per million output tokens (reasoning included)."""
    cached_input: float | None = None
    """Input tokens read from the prompt cache; None means the plain input price."""
    cache_write: float | None = None
    """Input tokens written to the prompt cache; None means the plain input price."""

    def cost(self, usage: Usage) -> float:
        cached = usage.cached_tokens
        written = usage.cache_write_tokens
        plain = max(usage.input_tokens - cached - written, 0)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        total = (plain * self.input + cached * cached_rate + written * write_rate
                 + usage.output_tokens * self.output)
        return total / 1_000_000


@dataclass(frozen=True)
class _Listed:
    """A model found in genai-prices: its base rates and the entry that prices long prompts too."""

    price: Price
    info: ModelInfo
    provider: Any
    tiered: bool = False
    """Whether any rate depends on the prompt's length (else the base rates are exact)."""


def _rate(value: Decimal | TieredPrices | None) -> float | None:
    if value is None:
        return None
    return float(value.base if isinstance(value, TieredPrices) else value)


@cache
def _listed(name: str) -> _Listed | None:
    """genai-prices' entry for "provider/model", or None (unknown provider or model)."""
    provider, model = split_name(name)
    if provider == SIMULATED:  # sim/openai/gpt-5 costs what openai/gpt-5 costs
        return _listed(model)
    provider_id = GENAI_PROVIDERS.get(provider)
    if provider_id is None:
        return None
    try:
        found_provider, info = get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None
    rates = info.get_prices(datetime.now(UTC))
    input_rate, output_rate = _rate(rates.input_mtok), _rate(rates.output_mtok)
    if input_rate is None or output_rate is None:
        return None
    price = Price(input=input_rate, output=output_rate, cached_input=_rate(rates.cache_read_mtok),
                  cache_write=_rate(rates.cache_write_mtok))
    tiered = (any(isinstance(value, TieredPrices) for value in vars(rates).values())
              or getattr(rates, "requests_kcount", None) is not None)
    return _Listed(price, info, found_provider, tiered)


def price_for(name: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of "provider/model": the override if given, else genai-prices' list price
    (base rates; long-prompt tiers apply in `PriceTable.cost`), else None."""
    if overrides and name in overrides:
        return overrides[name]
    listed = _listed(name)
    return listed.price if listed else None


def unpriced_models(names: Iterable[str], overrides: Mapping[str, Price] | None = None) -> list[str]:
    """The names among `names` (in order, once each) with no price; `scripted/` and `replay/`
    test models are left out, since they cost nothing by construction."""
    out: list[str] = []
    for name in names:
        if name in out or is_scripted(name):
            continue
        if price_for(name, overrides) is None:
            out.append(name)
    return out


class PriceTable:
    """Prices by exact "provider/model" name: overrides first, then genai-prices."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self.overrides: dict[str, Price] = dict(overrides or {})

    @classmethod
    def from_yaml(cls, path: Path | str) -> PriceTable:
        """Overrides from `{"provider/model": {input: .., output: .., cached_input: .., cache_write: ..}}`."""
        raw = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a mapping of model name to prices")
        return cls({str(k): Price.model_validate(v) for k, v in raw.items()})

    def lookup(self, model: str) -> Price | None:
        return price_for(model, self.overrides)

    def cost(self, model: str, usage: Usage) -> float:
        """Dollars for `usage`; 0.0 for a model without a price (`unpriced_models` says which)."""
        if model in self.overrides:
            return self.overrides[model].cost(usage)
        listed = _listed(model)
        if listed is None:
            return 0.0
        if not listed.tiered:  # the base rates are the whole price (and far cheaper to apply)
            return listed.price.cost(usage)
        try:
            calc = listed.info.calc_price(
                genai_prices.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                                   cache_read_tokens=usage.cached_tokens,
                                   cache_write_tokens=usage.cache_write_tokens),
                listed.provider)
        except ValueError:
            # Usage as a provider reported it, inconsistent (more cached than prompt tokens):
            # genai-prices refuses it; the base rates still price every token once.
            return listed.price.cost(usage)
        return float(calc.total_price)
