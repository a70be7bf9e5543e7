"""The simulated fleet: a pool of simulated environments that start, fail and bill like a
provider's machines, through the project's own pool mechanics (`ReplacingPool`).

Machines start in parallel when the pool opens (a launch may be refused for want of
capacity and is asked again after a backoff); a loan that finds its machine lost gets a
fresh one. What the fleet did (launches, capacity errors, losses, reverts, machine-hours,
dollars by the provider's hourly price with EC2's per-second billing, the most machines
lent at once) is its `FleetStats`, written as one JSON line to `environment.fleet_log`
when the pool closes.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aws.costs import CostBook
from core import clock
from core.protocols import EnvError
from environments.pool import ReplacingPool

from .environment import SimEnvironment
from .profile import FleetProfile, ProviderProfile

__all__ = ["FleetStats", "SimFleet"]

_log = logging.getLogger("environments.sim")


@dataclass
class FleetStats:
    """What the fleet did, in simulated seconds and dollars."""

    provider: str
    size: int
    launches: int = 0
    capacity_errors: int = 0
    losses: int = 0
    replaced: int = 0
    loans: int = 0
    peak_lent: int = 0
    machine_seconds: float = 0.0
    dollars: float = 0.0
    opened_at: float = 0.0
    closed_at: float = 0.0
    clock: str = ""
    note: str = field(default="SIMULATED")


class SimFleet(ReplacingPool[SimEnvironment]):
    """``async with SimFleet(160, ...) as pool``: simulated machines of one provider."""

    def __init__(self, size: int, *, profile: FleetProfile, provider: str, seed: int, speed: float = 1.0,
                 harness_waits: bool = False, log: Path | None = None, max_capacity_retries: int = 20) -> None:
        super().__init__(size, too_small="a simulated fleet needs at least one environment",
                         not_started="the simulated fleet was used before it started")
        self.profile = profile
        self.provider_name = provider
        self.provider: ProviderProfile = profile.provider(provider)
        self.rng = random.Random(seed)
        self.speed = speed
        self.harness_waits = harness_waits
        self.log = log
        self.max_capacity_retries = max_capacity_retries
        spec = clock.active()
        self.stats = FleetStats(provider=provider, size=size,
                                clock=spec.spec.describe() if spec is not None else "wall clock")
        price_key = self.provider.instance_type or provider
        self._book = CostBook(None, {price_key: self.provider.dollars_per_hour}, None)
        self._price_key = price_key
        self._names = itertools.count(1)
        self._machines = itertools.count(1)
        self._live: dict[str, float] = {}
        self._lent = 0

    # -- machines --------------------------------------------------------------------------

    def _start_machine(self) -> str:
        machine = f"sim-i-{next(self._machines):06d}"
        now = clock.monotonic()
        self._live[machine] = now
        self._book.start(machine, self._price_key, now)
        self.stats.launches += 1
        return machine

    def _end_machine(self, machine: str) -> None:
        started = self._live.pop(machine, None)
        if started is not None:
            now = clock.monotonic()
            self.stats.machine_seconds += now - started
            self._book.end(machine, now)

    def _relaunch(self, env: SimEnvironment) -> str:
        self._end_machine(env.instance)
        return self._start_machine()

    async def _launch(self, env: SimEnvironment) -> None:
        """Ask for a machine until one is granted (capacity errors back off), then boot it."""
        for _ in range(self.max_capacity_retries + 1):
            if self.rng.random() >= self.provider.capacity_error:
                break
            self.stats.capacity_errors += 1
            await clock.sleep(self.provider.capacity_backoff.draw(self.rng), speed=self.speed)
        else:
            raise EnvError(f"{env.name}: no capacity for a {self.provider_name} machine after "
                           f"{self.max_capacity_retries + 1} attempts (simulated InsufficientInstanceCapacity)")
        env.instance = self._start_machine()
        env.arm_failure()
        await clock.sleep(self.provider.launch.draw(self.rng) + self.provider.boot.draw(self.rng), speed=self.speed)

    # -- ReplacingPool -------------------------------------------------------------------

    async def _open(self) -> SimEnvironment:
        env = SimEnvironment(f"sim-{next(self._names)}", profile=self.profile, provider=self.provider, rng=self.rng,
                             speed=self.speed, harness_waits=self.harness_waits, on_relaunch=self._relaunch)
        await self._launch(env)
        return env

    async def _healthy(self, env: SimEnvironment) -> bool:
        if env.alive():
            return True
        self.stats.losses += 1
        return False

    async def replace(self, env: SimEnvironment) -> SimEnvironment:
        self.stats.replaced += 1
        self._end_machine(env.instance)
        return await super().replace(env)

    async def start(self) -> None:
        self.stats.opened_at = clock.now()
        await super().start()

    async def acquire(self) -> SimEnvironment:
        env = await super().acquire()
        self._lent += 1
        self.stats.loans += 1
        self.stats.peak_lent = max(self.stats.peak_lent, self._lent)
        return env

    def release(self, env: SimEnvironment) -> None:  # type: ignore[override]
        self._lent = max(self._lent - 1, 0)
        super().release(env)

    async def close(self) -> None:
        if self.stats.closed_at:
            return
        for machine in list(self._live):
            self._end_machine(machine)
        await super().close()
        self.stats.closed_at = clock.now()
        self.stats.dollars = self._book.spent(clock.monotonic())
        _log.info("simulated fleet: %s", json.dumps(asdict(self.stats)))
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("a") as out:
                out.write(json.dumps(asdict(self.stats)) + "\n")
