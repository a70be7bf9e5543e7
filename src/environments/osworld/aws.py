"""OSWorld desktops on EC2: a pool of `OSWorldDesktop`s, each over one instance of the fleet.

Revert is the fleet's (terminate, relaunch from the AMI, wait until the server and the
controller ports answer), so the instance, and its address, change under the desktop. Each
desktop's `OSWorldClient` is therefore built once over a transport that sends every request
to the current instance's server: callers (the runner's task setup included) may keep the
client across reverts. The same transport notes any request that can change the desktop,
which is what makes a later revert necessary. OSWorld's own controllers reach the same
instance's DevTools and VLC ports where the fleet found them (its own address, or the ports
``connect_via`` forwards). A terminated or vanished instance is reported as
`EnvironmentLost`; the fleet's watch notices one at once, in use or not, and the pool
replaces an idle one straight away. A task that asks for OSWorld's proxy gets it as
OSWorld's AWS scripts give it (`environments.osworld.proxy`). Shaped like
`environments.local.LocalProvider`: ``async with AWSProvider(4, ...) as pool``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx

from aws import (
    PORT_ROLES,
    AddressResolver,
    Fleet,
    FleetConfig,
    FleetError,
    HealthProbe,
    HttpProbe,
    Machine,
    UnhealthyDesktop,
    UpstreamMissing,
    upstream,
)
from aws.comparison import compare
from core.protocols import (
    EnvError,
    EnvironmentLost,
    ExecResult,
    Platform,
    Sandbox,
    SandboxLanguage,
    WorkerFacts,
)
from core.trajectory import Task
from environments.osworld.desktop import OSWorldDesktop, osworld_image_facts
from environments.osworld.fleet_client import FleetClient
from environments.osworld.ports import task_ports
from environments.osworld.proxy import ProxyPlan, plan_proxy, start_proxy, wants_proxy
from environments.pool import ReplacingPool
from environments.tasks.errors import TaskRunError
from environments.tasks.handling import score_with, set_up_with

__all__ = ["AWSDesktop", "AWSProvider", "rollout_of"]

_log = logging.getLogger("environments.osworld.aws")
T = TypeVar("T")

def _aws_password() -> str:
    """The sudo password of OSWorld's public AWS image (desktop-env's client password on AWS)."""
    try:
        return upstream().aws_password
    except UpstreamMissing:
        return "osworld-public-evaluation"


#: The sudo password of OSWorld's public AWS image (its desktop-env AWS provider's default).
OSWORLD_AWS_PASSWORD = _aws_password()


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
        proxy: ProxyPlan | None = None,
    ) -> None:
        client = FleetClient(machine, token)
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
        self.proxy = proxy or ProxyPlan(False, None)
        self._proxied = False

    @property
    def instance_id(self) -> str | None:
        return self.machine.instance_id

    async def alive(self) -> bool:
        """True while the instance runs (asks EC2 now)."""
        return await self._problem(force=True) is None

    async def _problem(self, *, force: bool) -> str | None:
        if self._lost is not None:
            return self._lost
        if self.machine.lost is not None:  # the fleet's watch saw the instance die
            return self.machine.lost
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
        """Relaunch from the image (skipped while unused and alive), tag the instance with what
        it now serves, refuse a task that needs a port this desktop cannot reach, set up
        OSWorld's proxy when the task asks for it, and run the task's setup steps."""
        await self.revert()
        await self.relabel(task=task.id, rollout=rollout_of(cache_dir))
        self._check_ports(task)
        self._proxied = self.proxy.enabled and wants_proxy(task)
        self.machine.mark_used()  # OSWorld's controller changes the desktop without this client's transport
        if self._proxied:
            await start_proxy(self.client, self.proxy, self._facts.password or "", task_id=task.id)
        await set_up_with(self.client, task, cache_dir, password=self._facts.password, use_proxy=self._proxied)

    def _check_ports(self, task: Task) -> None:
        reach = self.machine.reach
        for name in sorted(task_ports(task)):
            if reach is None or name not in reach.ports or self.machine.ports.get(name) == "blocked":
                port = self.fleet.config.ports.get(name)
                raise TaskRunError(
                    f"task {task.id}: needs {PORT_ROLES[name]} (port {port}), which {self.name} cannot reach: "
                    f"open it to this host (or forward it, connect_via) and keep {name} in required_ports")

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        if task.evaluator is not None and task.evaluator.postconfig:
            self.machine.mark_used()  # postconfig steps change the desktop outside this client
        return await score_with(self.client, task, cache_dir, last_action=last_action,
                                password=self._facts.password, use_proxy=self._proxied)

    async def worker_facts(self) -> WorkerFacts:
        """OSWorld's image account, and how these desktops compare with desktop-env's."""
        found = compare(self.fleet.config, instance_types=self.fleet.stats.instance_types,
                        proxy_off=not self.proxy.enabled)
        return dataclasses.replace(self._facts, leaderboard_note=found.note, leaderboard_comparable=found.comparable)

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
        except FleetError as exc:  # a blocked port, no capacity: the fleet's own line
            self._lost = str(exc)
            raise EnvError(str(exc)) from exc
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
    """Launches ``size`` desktops on EC2 and lends them out, like `LocalProvider` does locally;
    a desktop whose instance dies while idle is replaced at once (a new one launched first,
    then the dead one dropped), one lent out when it comes back."""

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
        try:
            self.fleet = fleet or Fleet(
                config or FleetConfig(),
                run_id=run_id or "run-" + secrets.token_hex(4),
                probe=probe or HttpProbe(token),
                resolve=resolve,
            )
            self.proxy = plan_proxy(self.fleet.config.proxy, self.fleet.config.proxy_config_file)
        except (ValueError, OSError, UpstreamMissing) as exc:
            raise EnvError(str(exc).splitlines()[0]) from None
        self.platform: Platform = platform
        self.with_sandbox = with_sandbox
        self.action_timeout = action_timeout
        self.state_check_interval = state_check_interval
        self._counter = 0
        self._lent: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._replacing: set[asyncio.Task[None]] = set()
        self.replaced_idle = 0
        self.fleet.listeners.append(self._instance_died)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await super().start()

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
            proxy=self.proxy,
        )

    async def _healthy(self, env: AWSDesktop) -> bool:
        """Whether its instance runs (asks EC2 now)."""
        return await env.alive()

    async def acquire(self) -> AWSDesktop:
        env = await super().acquire()
        self._lent.add(env.name)
        return env

    def release(self, env: AWSDesktop) -> None:
        self._lent.discard(env.name)
        super().release(env)

    def _instance_died(self, machine: Machine) -> None:
        """From the fleet's watch (a worker thread): replace the desktop if it sits idle."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule_replacement, machine)

    def _schedule_replacement(self, machine: Machine) -> None:
        env = next((e for e in self._envs.values() if e.machine is machine), None)
        if env is None or env.name in self._lent:
            return  # lent out: its next call fails, and it is replaced when it comes back
        task = asyncio.get_running_loop().create_task(self._replace_idle(env))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _replace_idle(self, env: AWSDesktop) -> None:
        try:
            fresh = await self._start_one()
        except Exception as exc:  # the dead one stays queued: the next loan replaces it, or says why not
            _log.error("could not replace %s, whose instance died: %s", env.name, str(exc).splitlines()[0])
            return
        await env.close()
        if self._idle is not None:
            self._idle.put_nowait(fresh)
        self.replaced_idle += 1
        _log.info("%s replaced %s, whose instance died while idle", fresh.name, env.name)

    async def close(self) -> None:
        """Terminate every desktop (and the fleet, if this pool made it); safe to call twice."""
        for task in list(self._replacing):
            task.cancel()
        await asyncio.gather(*self._replacing, return_exceptions=True)
        await super().close()
        if self._owns_fleet:
            await self.fleet.close()
