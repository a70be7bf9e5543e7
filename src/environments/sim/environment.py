"""One simulated environment: an OSWorld-like desktop that only takes time.

Every request takes the simulated time the fleet profile draws for it (`core.clock.sleep`),
and the environment keeps just enough state to be scored: which task it was prepared for,
how many actions it took, and whether an action reached the task's goal. The simulated
policy (``sim/...`` models) marks the action that reaches it by typing `GOAL_MARK`; the
evaluator then scores 1, else 0. An instance may be lost mid-rollout, as a cloud VM is
(`EnvironmentLost` on the next request), at the provider's failure rate.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core import clock
from core.distributions import Skewed
from core.protocols import (
    Environment,
    EnvironmentLost,
    ExecResult,
    Platform,
    Sandbox,
    SandboxLanguage,
    WorkerFacts,
)
from core.trajectory import Task

from .profile import FleetProfile, ProviderProfile
from .screen import screen_png

__all__ = ["GOAL_MARK", "SIM_NOTE", "SimEnvironment", "SimSandbox"]

#: Text the simulated policy types when its rollout reaches the task's goal.
GOAL_MARK = "SIM-GOAL"
#: The label every result of a simulated run carries (`WorkerFacts.leaderboard_note`).
SIM_NOTE = ("SIMULATED: no desktop ran; environments, their latencies and failures come from "
            "environments/sim/fleet.yaml and scores from the simulated policy")


@dataclass
class _State:
    task: str = ""
    steps: int = 0
    goal: bool = False
    nonce: int = 0


class SimSandbox:
    """The coding agent's sandbox on a simulated environment: each block takes time and succeeds."""

    def __init__(self, env: SimEnvironment) -> None:
        self.env = env

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        await self.env.wait(self.env.profile.server.code_run, cap=timeout)
        if GOAL_MARK in code:
            self.env.state.goal = True
        return ExecResult(status="ok", returncode=0, stdout=f"(simulated {language} run)\n")


class SimEnvironment(Environment):
    """A simulated environment of one fleet; `instance` changes on a relaunching revert."""

    def __init__(self, name: str, *, profile: FleetProfile, provider: ProviderProfile, rng: random.Random,
                 speed: float, harness_waits: bool, on_relaunch: Callable[[SimEnvironment], str],
                 platform: Platform = "ubuntu") -> None:
        self.name = name
        self.platform = platform
        self.profile = profile
        self.provider = provider
        self.rng = rng
        self.speed = speed
        self.harness_waits = harness_waits
        self.state = _State()
        self.instance = ""
        self.dies_at = float("inf")
        self.closed = False
        self._on_relaunch = on_relaunch
        self._sandbox = SimSandbox(self)
        self.width = int(profile.screen.get("width", 1920))
        self.height = int(profile.screen.get("height", 1080))

    # -- time ----------------------------------------------------------------------------

    async def wait(self, what: Skewed, *, cap: float | None = None) -> None:
        """Take the simulated time `what` draws (at most `cap`); a lost instance fails first."""
        self._check()
        seconds = what.draw(self.rng)
        await clock.sleep(min(seconds, cap) if cap is not None else seconds, speed=self.speed)
        self._check()

    def arm_failure(self) -> None:
        """Draw when this instance will be lost (per hour of life at the provider's rate)."""
        rate = self.provider.failure_per_hour
        self.dies_at = clock.monotonic() + self.rng.expovariate(rate / 3600.0) if rate > 0 else float("inf")

    def alive(self) -> bool:
        return not self.closed and clock.monotonic() < self.dies_at

    def _check(self) -> None:
        if self.closed:
            raise EnvironmentLost(f"{self.name} is closed")
        if clock.monotonic() >= self.dies_at:
            raise EnvironmentLost(f"{self.name}: instance {self.instance} was terminated (simulated instance failure)")

    # -- the Environment interface --------------------------------------------------------

    async def screenshot(self) -> bytes:
        await self.wait(self.profile.server.screenshot)
        s = self.state
        return screen_png(f"{self.instance}:{s.nonce}:{s.task}:{s.steps}:{int(s.goal)}")

    async def screen_size(self) -> tuple[int, int]:
        self._check()
        return self.width, self.height

    async def cursor_position(self) -> tuple[int, int]:
        self._check()
        return self.width // 2, self.height // 2

    async def act(self, code: str) -> ExecResult:
        await self.wait(self.profile.server.action)
        self.state.steps += 1
        if GOAL_MARK in code:
            self.state.goal = True
        return ExecResult(status="ok", returncode=0)

    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    async def revert(self) -> None:
        if self.provider.revert_is_relaunch:
            self.instance = self._on_relaunch(self)  # the old machine ends, a new one is billed from now
            self.arm_failure()
        self._check()
        for part in self.provider.revert_draw_parts():
            await clock.sleep(part.draw(self.rng), speed=self.speed)
        self._check()
        self.state = _State(nonce=self.state.nonce + 1)

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        await self.revert()
        self.state.task = task.id
        if self.harness_waits:
            await self.wait(self.profile.harness.after_reset)
        for _ in task.config:
            await self.wait(self.profile.server.setup_step)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        if not task.evaluator:
            return None
        if self.harness_waits:
            await self.wait(self.profile.harness.before_score)
        await self.wait(self.profile.server.score)
        return 1.0 if self.state.goal else 0.0

    async def worker_facts(self) -> WorkerFacts:
        return WorkerFacts(user_name="user", home="/home/user", sudo="with_password", password="password",
                           leaderboard_note=SIM_NOTE, network=False)

    async def close(self) -> None:
        self.closed = True
