"""The simulated models' figures (`models.yaml` beside this file), read and checked.

`configure(file, overrides)` merges a YAML file and keys over the bundled figures for every
simulated model of the process (the runner calls it with ``sim_models`` of the run).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from core.config import layered
from core.distributions import Skewed

__all__ = ["MODELS_FILE", "AccountLimits", "ModuleFigures", "SimModels", "configure", "sim_models"]

MODELS_FILE = Path(__file__).with_name("models.yaml")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AccountLimits(_Model):
    """One provider account's limits per model and minute (None: not limited on that axis)."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    """Prompt and completion tokens together (OpenAI)."""
    input_tokens_per_minute: float | None = Field(default=None, gt=0)
    """Uncached prompt tokens (Anthropic)."""
    output_tokens_per_minute: float | None = Field(default=None, gt=0)
    source: str = ""


class ProviderFigures(_Model):
    limits: AccountLimits = AccountLimits()


class ModuleFigures(_Model):
    latency: Skewed
    input_tokens: Skewed
    output_tokens: Skewed
    cached_share: float = Field(default=0.0, ge=0, le=1)
    """Share of the input read from the prompt cache (billed at the cached rate)."""


class SimModels(_Model):
    providers: dict[str, ProviderFigures]
    modules: dict[str, ModuleFigures]
    behaviour: dict[str, Any] = Field(default_factory=dict)

    def module(self, name: str) -> ModuleFigures:
        found = self.modules.get(name) or self.modules.get("default")
        if found is None:
            raise KeyError(f"the simulated models have no figures for module {name!r} and no `default`")
        return found

    def limits(self, provider: str) -> AccountLimits:
        figures = self.providers.get(provider)
        return figures.limits if figures is not None else AccountLimits()


@cache
def _bundled() -> dict[str, Any]:
    data = yaml.safe_load(MODELS_FILE.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{MODELS_FILE} is not a mapping")
    return data


_LOCK = threading.Lock()
_CURRENT: SimModels | None = None


def configure(file: Path | None = None, overrides: Mapping[str, Any] | None = None) -> SimModels:
    """Set (and return) the figures of every simulated model of this process."""
    global _CURRENT
    found = SimModels.model_validate(layered(_bundled(), file, overrides, what="the simulated models' figures"))
    with _LOCK:
        _CURRENT = found
    return found


def sim_models() -> SimModels:
    """The figures in use (the bundled ones unless `configure` said otherwise)."""
    with _LOCK:
        current = _CURRENT
    return current if current is not None else configure()
