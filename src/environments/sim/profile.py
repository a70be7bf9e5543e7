"""The simulated fleet's figures (`fleet.yaml` beside this file), read and checked.

Each provider says how it starts, reverts and loses environments; the server section how
long each request to an environment takes; the harness section what OSWorld's own harness
waits besides the agent (used only when a run asks to replay it).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.config import layered
from core.distributions import Skewed

__all__ = ["FLEET_FILE", "FleetProfile", "HarnessWaits", "ProviderProfile", "ServerTimes", "load_profile"]

FLEET_FILE = Path(__file__).with_name("fleet.yaml")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)


class ServerTimes(_Model):
    """Seconds one request to an environment's server takes."""

    screenshot: Skewed
    action: Skewed
    setup_step: Skewed
    score: Skewed
    code_run: Skewed


class ProviderProfile(_Model):
    """How one provider starts, reverts and loses its environments."""

    description: str
    """What the provider is, in a line."""
    dollars_per_hour: float = Field(ge=0)
    """What one environment costs per hour of use."""
    dollars_source: str = ""
    """Where that price comes from."""
    instance_type: str | None = None
    """The machine type, where the provider has one (EC2)."""
    launch: Skewed
    boot: Skewed
    revert: Skewed | None = None
    """A revert in place; None when `revert_is_relaunch` (a revert is a new machine)."""
    revert_is_relaunch: bool = False
    """A revert is a new machine (launch, then boot), as on AWS and OSWorld's Docker."""
    failure_per_hour: float = Field(default=0.0, ge=0)
    """Environments lost per hour of use (an instance terminated mid-rollout)."""
    failure_source: str = ""
    """Where `failure_per_hour` comes from."""
    capacity_error: float = Field(default=0.0, ge=0, le=1)
    """Share of launches refused for want of capacity (retried after `capacity_backoff`)."""
    capacity_source: str = ""
    """Where `capacity_error` comes from."""
    capacity_backoff: Skewed = Skewed(median=30.0, mean=40.0, source="assumption")

    @model_validator(mode="after")
    def _revert(self) -> ProviderProfile:
        if self.revert is None and not self.revert_is_relaunch:
            raise ValueError("a provider needs `revert` unless `revert_is_relaunch` is true")
        return self

    def revert_draw_parts(self) -> tuple[Skewed, ...]:
        """What one revert is made of: a relaunch (launch, then boot) or the revert itself."""
        if self.revert_is_relaunch or self.revert is None:
            return (self.launch, self.boot)
        return (self.revert,)


class HarnessWaits(_Model):
    """OSWorld's harness waits (desktop-env 1.0.2's ``run_single_example``)."""

    after_reset: Skewed
    before_score: Skewed


class FleetProfile(_Model):
    screen: dict[str, int] = Field(default_factory=lambda: {"width": 1920, "height": 1080})
    """The simulated screens' size (``width``, ``height``)."""
    server: ServerTimes
    providers: dict[str, ProviderProfile]
    harness: HarnessWaits

    def provider(self, name: str) -> ProviderProfile:
        try:
            return self.providers[name]
        except KeyError:
            raise KeyError(f"no provider {name!r} in the fleet profile: use one of "
                           f"{', '.join(sorted(self.providers))}") from None


@cache
def _base() -> dict[str, Any]:
    data = yaml.safe_load(FLEET_FILE.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{FLEET_FILE} is not a mapping")
    return data


def load_profile(file: Path | None = None, overrides: Mapping[str, Any] | None = None) -> FleetProfile:
    """The fleet profile: `fleet.yaml`, then `file`'s keys, then `overrides`, merged."""
    return FleetProfile.model_validate(layered(_base(), file, overrides, what="a fleet profile"))
