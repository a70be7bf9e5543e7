"""The Ray executor's environment pool: one long-lived actor per host holds that host's
environments; rollouts borrow them here as `RemoteEnvironment` proxies.

The agent loops, the narrator and the judge stay in the driver, so the driver is the one
writer of the run folder and of the ledger: no filesystem needs to be shared, and every
file lands exactly where the in-process executor puts it. What crosses the network per
step is what OSWorld's own client/VM split sends anyway (one PNG, one action); the work
that needs a host's resources — desktops, their apps, their sandboxes — runs there.

A host lost mid-rollout (its actor died, its node left the cluster) surfaces as
`EnvironmentLost`, so strategies retry the rollout on another host exactly as they do
when a desktop dies. When no host is left, a lost host whose node is still alive is
started afresh (``executor.host_restarts`` times at most); a host that cannot start its
environments is left out of the run.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import NodeDiedError, ObjectLostError, RayActorError, RayTaskError, WorkerCrashedError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from core.protocols import EnvError, Environment, EnvironmentLost, ExecResult, SandboxLanguage, WorkerFacts
from core.trajectory import Task

from ..config import RunConfig
from .ray_host import EnvironmentHost, Loan
from .ray_session import ray_session

__all__ = ["HostHandle", "RayPool", "RemoteEnvironment", "open_ray_pool"]

_log = logging.getLogger(__name__)

#: Ray's ways of saying a host, its actor or its reply is gone.
_LOST = (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError)
#: Seconds a host may take to stop its environments at the end of a run.
_CLOSE_TIMEOUT = 60.0


@dataclass
class HostHandle:
    """The driver's view of one host: its actor, its share of environments, its loans."""

    actor: Any
    label: str
    size: int
    node_id: str
    alive: bool = True
    loans: int = 0
    #: How many times this host's actor was started afresh after a loss.
    restarts: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def call(self, method: str, *args: Any) -> Any:
        """Call the actor; its own errors are re-raised as they were, losing it is
        `EnvironmentLost`."""
        if not self.alive:
            raise EnvironmentLost(f"Ray host {self.label} was lost earlier in the run")
        try:
            # through a concurrent future: what both Ray's own refs and Ray Client's offer
            return await asyncio.wrap_future(getattr(self.actor, method).remote(*args).future())
        except RayTaskError as e:
            cause = e.cause
            if isinstance(cause, BaseException):
                raise cause from None
            raise EnvError(f"Ray host {self.label}: {e}") from None
        except _LOST as e:
            self.alive = False
            raise EnvironmentLost(f"Ray host {self.label} lost: {type(e).__name__}: {str(e)[:300]}") from None


class _RemoteSandbox:
    """The coding sandbox of a remote environment: code runs on its host."""

    def __init__(self, env: RemoteEnvironment) -> None:
        self._env = env

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        result: ExecResult = await self._env.call("sandbox_run", language, code, timeout)
        return result


class RemoteEnvironment(Environment):
    """An environment lent by a host's actor: the task is set up and scored on that host,
    and the worker's facts come from there."""

    def __init__(self, host: HostHandle, loan: Loan) -> None:
        self.host = host
        self.loan = loan
        self.generation = host.restarts
        self.name = f"{loan.name}@{host.label}"
        self.platform = loan.platform
        self.released = False
        self._sandbox = _RemoteSandbox(self) if loan.has_sandbox else None

    async def call(self, method: str, *args: Any) -> Any:
        return await self.host.call(method, self.loan.name, *args)

    async def screenshot(self) -> bytes:
        shot: bytes = await self.call("screenshot")
        return shot

    async def screen_size(self) -> tuple[int, int]:
        w, h = await self.call("screen_size")
        return int(w), int(h)

    async def cursor_position(self) -> tuple[int, int]:
        x, y = await self.call("cursor_position")
        return int(x), int(y)

    async def act(self, code: str) -> ExecResult:
        result: ExecResult = await self.call("act", code)
        return result

    def sandbox(self) -> _RemoteSandbox | None:
        return self._sandbox

    async def revert(self) -> None:
        await self.call("revert")

    async def close(self) -> None:
        """Nothing to do: the host stops its environments when the run's pool closes."""

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        files = await self.call("prepare", task, _cache_key(task, cache_dir))
        await asyncio.to_thread(_store, cache_dir, files)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        score, files = await self.call("score", task, _cache_key(task, cache_dir), last_action)
        await asyncio.to_thread(_store, cache_dir, files)
        return None if score is None else float(score)

    async def worker_facts(self) -> WorkerFacts:
        facts: WorkerFacts = await self.call("worker_facts")
        return facts

    async def accessibility_tree(self) -> str | None:
        tree: str | None = await self.call("accessibility_tree")
        return tree

    async def start_recording(self) -> bool:
        return bool(await self.call("start_recording"))

    async def end_recording(self) -> bytes:
        video: bytes = await self.call("end_recording")
        return video


def _cache_key(task: Task, cache_dir: Path) -> str:
    return f"{task.id}/{cache_dir.name}"


def _store(root: Path, files: dict[str, bytes]) -> None:
    """Write the files a host's evaluator cache held, under the driver's cache folder."""
    for rel, data in files.items():
        path = (root / rel).resolve()
        if not path.is_relative_to(root.resolve()):
            continue  # a name that would leave the folder is not ours to write
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


#: Starts a host's actor and its environments (True: it runs).
Spawn = Callable[[HostHandle], Awaitable[bool]]


class RayPool:
    """Lends environments of the run's hosts, the least loaded host first; a lost host is
    skipped, restarted when none is left, and when none can be borrowing fails as
    `EnvironmentLost`."""

    def __init__(self, hosts: list[HostHandle], spawn: Spawn | None = None, *, restarts: int = 0) -> None:
        self.hosts = hosts
        self._spawn = spawn
        self._restarts = restarts

    async def acquire(self) -> Environment:
        while True:
            alive = [h for h in self.hosts if h.alive]
            if not alive and not await self._revive():
                raise EnvironmentLost("every Ray host of the run was lost; see the hosts' Ray logs")
            alive = [h for h in self.hosts if h.alive]
            if not alive:
                continue
            host = min(alive, key=lambda h: h.loans / h.size)
            host.loans += 1
            try:
                loan: Loan = await host.call("acquire")
            except EnvironmentLost:
                host.loans -= 1
                continue
            except BaseException:
                host.loans -= 1
                raise
            return RemoteEnvironment(host, loan)

    def release(self, env: Environment) -> None:
        if not isinstance(env, RemoteEnvironment) or env.released:
            return
        env.released = True
        if env.generation != env.host.restarts:
            return  # lent by an actor that is gone; its successor never lent it
        env.host.loans -= 1
        if env.host.alive:
            env.host.actor.release.remote(env.loan.name)  # ordered after the loan's last call

    async def _revive(self) -> bool:
        """Start afresh a lost host whose node is still in the cluster (True: one runs)."""
        if self._spawn is None:
            return False
        nodes = await asyncio.to_thread(ray.nodes)
        alive_nodes = {str(n["NodeID"]) for n in nodes if n.get("Alive")}
        for host in self.hosts:
            async with host.lock:  # rollouts finding the host lost at once restart it once
                if host.alive:
                    return True
                if host.restarts >= self._restarts or host.node_id not in alive_nodes:
                    continue
                host.restarts += 1
                host.loans = 0
                _log.warning("Ray host %s was lost; starting it afresh (%d of %d)", host.label,
                             host.restarts, self._restarts)
                if await self._spawn(host):
                    return True
        return False


@asynccontextmanager
async def open_ray_pool(cfg: RunConfig, *, size: int = 1, hide: tuple[str, ...] = (),
                        run_id: str | None = None) -> AsyncIterator[RayPool]:
    """Connect to (or start) the cluster, start one environment host per node, and stop
    them all afterwards (on errors and Ctrl-C too). With ``environment.kind: aws`` each
    host launches its own share of the fleet (its caps are that host's), tagged `run_id`."""
    ex = cfg.executor
    with ray_session(ex.ray_address):
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: str(n["NodeID"]))
        nodes = nodes[: ex.max_hosts] if ex.max_hosts else nodes
        if not nodes:
            raise EnvError(f"the Ray cluster at {ex.ray_address} has no alive node")
        per_host = ex.per_host or max(1, math.ceil(size / len(nodes)))
        remote_host = ray.remote(EnvironmentHost)

        def new_actor(node_id: str) -> Any:
            return remote_host.options(  # type: ignore[attr-defined]
                num_cpus=0, max_restarts=0, max_concurrency=1000,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()

        hosts = [HostHandle(actor=new_actor(str(n["NodeID"])), label=str(n.get("NodeManagerAddress") or "?"),
                            size=per_host, node_id=str(n["NodeID"])) for n in nodes]

        async def respawn(host: HostHandle) -> bool:
            host.actor, host.alive = new_actor(host.node_id), True
            try:
                await host.call("start", cfg.environment, per_host, hide, run_id)
            except Exception as e:
                _log.warning("Ray host %s could not start again: %s", host.label, e)
                host.alive = False
            return host.alive

        try:
            await _start(hosts, cfg, per_host, hide, run_id)
            yield RayPool(hosts, respawn, restarts=ex.host_restarts)
        finally:
            await _stop(hosts)


async def _start(hosts: list[HostHandle], cfg: RunConfig, per_host: int, hide: tuple[str, ...],
                 run_id: str | None) -> None:
    started = await asyncio.gather(*(h.call("start", cfg.environment, per_host, hide, run_id) for h in hosts),
                                   return_exceptions=True)
    errors: list[BaseException] = []
    for host, out in zip(hosts, started, strict=True):
        if isinstance(out, BaseException):
            _log.warning("Ray host %s could not start its environments: %s", host.label, out)
            host.alive = False
            errors.append(out)
        else:  # the host's name, and its address when several hosts run
            host.label = f"{out}-{host.label}" if len(hosts) > 1 else str(out)
    if errors and len(errors) == len(hosts):
        first = errors[0]
        if isinstance(first, EnvError):
            raise first
        raise EnvError(f"no Ray host could start its environments: {type(first).__name__}: {first}")


async def _stop(hosts: list[HostHandle]) -> None:
    """Ask every host to stop its environments, then end the actors."""
    closing = [h.actor.close.remote() for h in hosts if h.alive]
    if closing:
        done = asyncio.gather(*closing, return_exceptions=True)
        try:
            await asyncio.wait_for(asyncio.shield(done), _CLOSE_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError):
            _log.warning("Ray hosts did not stop their environments in time; their watchdogs will")
    for h in hosts:
        try:
            ray.kill(h.actor, no_restart=True)
        except Exception as e:  # already gone with its node
            _log.debug("Ray host %s: %s", h.label, e)
