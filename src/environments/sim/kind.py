"""The ``sim`` kind: a simulated fleet that exercises the real runner at a paper's scale.

No desktop runs. Each environment takes the time the fleet profile (`fleet.yaml`, every
figure with its source) draws for a screenshot, an action, a revert, a launch, and fails
as cloud machines do; everything around it is the project's own code (the scheduler, the
executors, narration, the judge, the ledger, resume, the report). Used with the simulated
models (``--model sim/openai/gpt-5``), ``agent-s3 bench osworld --env sim --rollouts 10``
runs OSWorld's 361 tasks on 160 environments in minutes on a laptop, because the run's
clock is simulated (`core.clock`): ``virtual`` by default (simulated time costs no real
time), or ``scaled`` (the wall clock sped up, for Ray, whose hosts run in other
processes). Every result says SIMULATED.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import Field

from core.clock import ClockSpec
from core.config import Checks
from core.protocols import EnvError

from ..kinds import EnvironmentKind, EnvironmentSettings, PoolRequest, register
from ..pool import EnvironmentPool
from .fleet import SimFleet
from .profile import FleetProfile, load_profile

__all__ = ["SimSettings"]


class SimSettings(EnvironmentSettings):
    """A simulated fleet (no desktop runs): latencies, failures and prices from a profile."""

    kind: Literal["sim"] = "sim"
    provider: Literal["aws", "docker", "local", "qemu"] = "aws"
    """Which provider the fleet behaves like: how it starts, reverts (aws: a relaunch;
    docker: a cold boot; local: a spare swap; qemu: a live snapshot) and fails."""
    fleet: int = Field(default=160, ge=1)
    """Environments at most (the paper's four hosts of 40 OSWorld VMs each); rollouts beyond
    wait for one."""
    clock: Literal["virtual", "scaled"] = "virtual"
    """``virtual``: simulated seconds cost no real time (one process only); ``scaled``: the
    wall clock runs `speed` times faster (works across Ray's processes)."""
    speed: float = Field(default=100.0, gt=0)
    """Simulated seconds per real second with ``clock: scaled``."""
    seed: int = 0
    """Seed of the fleet's draws (latencies, failures, capacity errors)."""
    harness_waits: bool = False
    """Add what OSWorld's own harness waits besides the agent (60 s after each reset, 20 s
    before scoring), to replay the paper's pipeline; the runner itself waits for readiness."""
    profile: Path | None = None
    """A YAML file merged over the bundled fleet profile (environments/sim/fleet.yaml)."""
    overrides: Annotated[dict[str, Any], Checks(
        lambda data: FleetProfile, "`environments.sim.profile.FleetProfile` (merged over the bundled fleet.yaml)",
        partial=True, label="overrides")] = Field(default_factory=dict)
    """Keys merged over the profile, e.g. ``{providers: {aws: {failure_per_hour: 0.05}}}``."""
    fleet_log: Path | None = None
    """Append what the fleet did (machine-hours, dollars, launches, losses, the most lent
    at once) as one JSON line here when the pool closes."""

    def where(self) -> str:
        return f"SIMULATED {self.provider} fleet of {self.fleet} ({self.clock} clock)"

    def check(self) -> None:
        try:
            load_profile(self.profile, self.overrides).provider(self.provider)
        except (OSError, ValueError, KeyError) as e:
            raise EnvError(f"environment.profile: {e}") from None

    def clock_spec(self) -> ClockSpec:
        return ClockSpec(self.clock, self.speed if self.clock == "scaled" else 1.0)


@asynccontextmanager
async def open_sim_pool(cfg: SimSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    profile = load_profile(cfg.profile, cfg.overrides)
    size = max(1, min(request.size, cfg.fleet))
    async with SimFleet(size, profile=profile, provider=cfg.provider, seed=cfg.seed, speed=cfg.speed,
                        harness_waits=cfg.harness_waits, log=cfg.fleet_log) as fleet:
        yield cast(EnvironmentPool, fleet)  # lends and takes back only its own SimEnvironments


register(EnvironmentKind(
    name="sim",
    settings=SimSettings,
    description="a SIMULATED fleet: no desktop runs, times and failures from environments/sim/fleet.yaml",
    open_pool=open_sim_pool,
    platforms=("ubuntu",),
    own_scoring=True,
    clock=lambda cfg: cfg.clock_spec(),
))
