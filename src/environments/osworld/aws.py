"""OSWorld desktops on EC2: a pool of `OSWorldDesktop`s, each over one instance of the fleet.

Revert is the fleet's (terminate, relaunch from the AMI, wait until the server answers), so
the instance, and its address, change under the desktop. Each desktop's `OSWorldClient` is
therefore built once over a transport that sends every request to the current instance's
server: callers (the runner's task setup included) may keep the client across reverts. The
same transport notes any request that can change the desktop, which is what makes a
later revert necessary. A terminated or vanished instance is reported as `EnvironmentLost`.
Shaped like `environments.local.LocalProvider`: ``async with AWSProvider(4, ...) as pool``.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx

from aws import AddressResolver, Fleet, FleetConfig, HealthProbe, HttpProbe, Machine, UnhealthyDesktop
from core.protocols import EnvError, EnvironmentLost, ExecResult, Platform, Sandbox, SandboxLanguage
from core.trajectory import Task
from environments.osworld.client import OSWorldClient
from environments.osworld.desktop import OSWorldDesktop, osworld_image_facts
from environments.pool import ReplacingPool
from environments.tasks.handling import set_up_with

__all__ = ["AWSDesktop", "AWSProvider", "rollout_of"]

_log = logging.getLogger("environments.osworld.aws")
T = TypeVar("T")

#: Requests that only read the desktop; anything else marks it used (a revert is then due).
_READS = frozenset(
    {"/screenshot", "/screen_size", "/cursor_position", "/platform", "/accessibility", "/terminal",
     "/file", "/list_directory", "/window_size", "/wallpaper", "/desktop_path", "/obs_winagent"}
)  # fmt: skip


class _CurrentInstance(httpx.AsyncBaseTransport):
    """Sends each request to the machine's current server URL; records desktop-changing calls."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=4, max_keepalive_connections=1))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        base = self._machine.url
        if base is None:
            raise httpx.ConnectError(f"{self._machine.name} has no instance right now", request=request)
        target = httpx.URL(base)
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["Host"] = target.netloc.decode("ascii")
        if request.url.path not in _READS:
            self._machine.mark_used()
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


#: The sudo password of OSWorld's public AWS image (its desktop-env AWS provider's default).
OSWORLD_AWS_PASSWORD = "osworld-public-evaluation"


class AWSDesktop(OSWorldDesktop):
    """An `OSWorldDesktop` on one fleet machine; revert relaunches, a dead instance is lost."""

    def __init__(
        self,
        fleet: Fleet,
        machine: Machine,
        *,
        token: str | None = None,
        platform: Platform = "ubuntu",
        with_sandbox: bool = True,
        action_timeout: float = 30.0,
        state_check_interval: float = 30.0,
        on_close: Callable[[AWSDesktop], Awaitable[None]] | None = None,
    ) -> None:
        client = OSWorldClient(
            f"http://{machine.name}",
            token=token,
            transport=_CurrentInstance(machine),
            door_url=lambda: machine.url,
        )
        super().__init__(
            client,
            name=machine.name,
            platform=platform,
            revert=self._relaunch,
            on_close=self._release,
            with_sandbox=with_sandbox,
            action_timeout=action_timeout,
            facts=osworld_image_facts(platform, OSWORLD_AWS_PASSWORD),
        )
        self.fleet = fleet
        self.machine = machine
        self.state_check_interval = state_check_interval
        self._owner_close = on_close
        self._checked_at = time.monotonic()
        self._lost: str | None = None
        self._released = False

    @property
    def instance_id(self) -> str | None:
        return self.machine.instance_id

    async def alive(self) -> bool:
        """True while the instance runs (asks EC2 now)."""
        return await self._problem(force=True) is None

    async def _problem(self, *, force: bool) -> str | None:
        if self._lost is not None:
            return self._lost
        instance = self.machine.instance_id
        if instance is None:
            return f"{self.name} has no instance (closed, or its revert failed)"
        if not force and time.monotonic() - self._checked_at < self.state_check_interval:
            return None
        try:
            state = await self.fleet.state(instance)
        except Exception as exc:  # the EC2 API failing says nothing about the instance
            _log.warning("could not ask EC2 about %s: %s", instance, type(exc).__name__)
            return None
        self._checked_at = time.monotonic()
        if state != "running":
            self._lost = f"instance {instance} of {self.name} is {state}"
        return self._lost

    async def _guard(self, call: Callable[[], Awaitable[T]]) -> T:
        problem = await self._problem(force=False)
        if problem is not None:
            raise EnvironmentLost(problem)
        try:
            return await call()
        except (EnvError, OSError, httpx.HTTPError) as exc:
            problem = await self._problem(force=True)
            if problem is not None:
                raise EnvironmentLost(problem) from exc
            raise

    async def screenshot(self) -> bytes:
        return await self._guard(super().screenshot)

    async def screen_size(self) -> tuple[int, int]:
        return await self._guard(super().screen_size)

    async def cursor_position(self) -> tuple[int, int]:
        return await self._guard(super().cursor_position)

    async def act(self, code: str) -> ExecResult:
        return await self._guard(lambda: OSWorldDesktop.act(self, code))

    def sandbox(self) -> Sandbox | None:
        inner = super().sandbox()
        return None if inner is None else _GuardedSandbox(self, inner)

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        """Relaunch from the image (skipped while unused), tag the instance with what it now
        serves, and run the task's setup steps on it."""
        await self.revert()
        await self.relabel(task=task.id, rollout=rollout_of(cache_dir))
        self.machine.mark_used()  # OSWorld's controller changes the desktop without this client's transport
        await set_up_with(self.client, task, cache_dir, password=self._facts.password)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        if task.evaluator.get("postconfig"):
            self.machine.mark_used()  # postconfig steps change the desktop outside this client
        return await super().score_task(task, cache_dir, last_action=last_action)

    async def relabel(self, *, task: str, rollout: int | None) -> None:
        """Tag the instance (and later relaunches) with the task and rollout it now serves."""
        await self.fleet.relabel(self.machine, task=task, rollout=rollout)

    async def _relaunch(self) -> None:
        if self._released:
            raise EnvironmentLost(f"{self.name} was closed")
        try:
            await self.fleet.revert(self.machine)
        except UnhealthyDesktop as exc:
            self._lost = str(exc)
            raise EnvironmentLost(str(exc)) from exc
        self._lost = None
        self._checked_at = time.monotonic()

    async def _release(self) -> None:
        self._released = True
        self._lost = f"{self.name} was closed"
        try:
            await self.fleet.release(self.machine)
        finally:
            if self._owner_close is not None:
                await self._owner_close(self)


def rollout_of(cache_dir: Path) -> int | None:
    """The rollout a task's evaluation cache belongs to (``.../rollout-K``), if it says."""
    head, _, number = cache_dir.name.rpartition("-")
    return int(number) if head == "rollout" and number.isdigit() else None


class _GuardedSandbox:
    """The server's sandbox, with a dead instance reported as `EnvironmentLost`."""

    def __init__(self, env: AWSDesktop, inner: Sandbox) -> None:
        self._env = env
        self._inner = inner

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        return await self._env._guard(lambda: self._inner.run(language, code, timeout=timeout))


class AWSProvider(ReplacingPool[AWSDesktop]):
    """Launches ``size`` desktops on EC2 and lends them out, like `LocalProvider` does locally."""

    def __init__(
        self,
        size: int = 1,
        *,
        config: FleetConfig | None = None,
        run_id: str | None = None,
        token: str | None = None,
        prefix: str = "aws",
        probe: HealthProbe | None = None,
        resolve: AddressResolver | None = None,
        fleet: Fleet | None = None,
        platform: Platform = "ubuntu",
        with_sandbox: bool = True,
        action_timeout: float = 30.0,
        state_check_interval: float = 30.0,
    ) -> None:
        super().__init__(
            size,
            too_small="an AWS pool needs at least one desktop; pass size >= 1",
            not_started="the AWS pool is not started; use `async with AWSProvider(...)`",
        )
        self.prefix = prefix
        self._token = token
        self._owns_fleet = fleet is None
        self.fleet = fleet or Fleet(
            config or FleetConfig(),
            run_id=run_id or "run-" + secrets.token_hex(4),
            probe=probe or HttpProbe(token),
            resolve=resolve,
        )
        self.platform: Platform = platform
        self.with_sandbox = with_sandbox
        self.action_timeout = action_timeout
        self.state_check_interval = state_check_interval
        self._counter = 0

    async def _open(self) -> AWSDesktop:
        self._counter += 1
        rollout = self._counter - 1
        machine = await self.fleet.launch(f"{self.prefix}-{self._counter}", rollout=rollout)
        return AWSDesktop(
            self.fleet,
            machine,
            token=self._token,
            platform=self.platform,
            with_sandbox=self.with_sandbox,
            action_timeout=self.action_timeout,
            state_check_interval=self.state_check_interval,
            on_close=self._forget,
        )

    async def _healthy(self, env: AWSDesktop) -> bool:
        """Whether its instance runs (asks EC2 now)."""
        return await env.alive()

    async def close(self) -> None:
        """Terminate every desktop (and the fleet, if this pool made it); safe to call twice."""
        await super().close()
        if self._owns_fleet:
            await self.fleet.close()
