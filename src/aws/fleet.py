"""`Fleet`: launches OSWorld desktop instances on EC2, keeps them healthy, and never leaks them.

A launch is: check the caps, `run_instances` (tagged, TTL'd), the `instance_running` waiter,
then the health probe against the in-VM server; an instance that never gets there is
terminated and replaced, a bounded number of times. Revert terminates the instance and
launches a fresh one from the AMI, unless the desktop was never used. Everything launched is
remembered (and tagged with this fleet's id) so `close`, atexit and the signal handlers can
terminate it all; the blocking EC2 calls run on the fleet's own threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import getpass
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from botocore.exceptions import WaiterError

from . import ec2, registry
from .config import FleetConfig
from .costs import CostBook
from .errors import FleetCapReached, FleetClosed, UnhealthyDesktop
from .health import HealthProbe, HttpProbe, wait_healthy
from .machine import AddressResolver, FleetStats, Machine, server_address
from .tags import FLEET, ROLLOUT, TASK, InstanceRecord, instance_tags

__all__ = ["Fleet"]

_log = logging.getLogger("aws.fleet")
T = TypeVar("T")
#: Seconds `terminate_everything` waits for `run_instances` calls already on the wire.
_INFLIGHT_WAIT_S = 60.0


def _default_owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


class Fleet:
    """The EC2 desktops of one run in one region; ``async with Fleet(cfg, run_id=...)``."""

    def __init__(
        self,
        config: FleetConfig,
        *,
        run_id: str,
        owner: str | None = None,
        probe: HealthProbe | None = None,
        resolve: AddressResolver | None = None,
        client: Any | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config.resolved()
        self.config.image_id()  # an unknown region or screen fails here, before any launch
        self.region = self.config.region or "us-east-1"
        self.run_id = run_id
        self.owner = owner or _default_owner()
        self.fleet_id = uuid.uuid4().hex[:12]
        self.probe: HealthProbe = probe or HttpProbe()
        self.resolve: AddressResolver = resolve or server_address(self.config)
        self.stats = FleetStats()
        self.costs = CostBook(self.config.max_cost, self.config.prices, self.config.ttl_seconds)
        self._client = client if client is not None else ec2.ec2_client(self.region, self.config.endpoint_url)
        self._clock = clock
        self._live: dict[str, InstanceRecord] = {}
        self._lock = threading.Condition()
        self._inflight = 0
        self._closed = False
        self._swept = False
        self._pool: ThreadPoolExecutor | None = None
        self._pool_closed = False

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- blocking parts (run on the fleet's threads, or in a signal handler's helper) -------

    def _run_instance(self, machine: Machine) -> InstanceRecord:
        cfg = self.config
        with self._lock:
            if self._closed:
                raise FleetClosed("the fleet is shutting down; no more desktops are launched")
            held = len(self._live) + self._inflight
            if held >= cfg.max_instances:
                raise FleetCapReached(
                    f"the fleet already holds {held} instances, its max_instances: raise "
                    f"max_instances or run fewer desktops at once"
                )
            now = self._clock()
            self.costs.check(cfg.instance_type or "", now, pending=self._inflight)
            self._inflight += 1
        record: InstanceRecord | None = None
        try:
            ttl = cfg.ttl_seconds
            tags = instance_tags(
                run_id=self.run_id,
                fleet_id=self.fleet_id,
                owner=self.owner,
                host=socket.gethostname(),
                pid=os.getpid(),
                task=machine.task,
                rollout=machine.rollout,
                expires_at=None if ttl is None else now + ttl,
            )
            reply = ec2.run_instance(self._client, ec2.launch_request(cfg, tags, uuid.uuid4().hex))
            record = InstanceRecord.from_ec2(reply["Instances"][0], self.region)
        finally:
            with self._lock:
                self._inflight -= 1
                if record is not None:
                    self._live[record.id] = record
                    self.costs.start(record.id, record.instance_type or cfg.instance_type or "", self._clock())
                    self.stats.launched += 1
                    machine.launches += 1
                self._lock.notify_all()
        _log.info("launched %s (%s, %s) for %s", record.id, record.instance_type, record.image_id, machine.name)
        if self._closed:
            self._terminate([record.id])
            raise FleetClosed("the fleet is shutting down; the instance just launched was terminated")
        return record

    def _wait_running(self, instance_id: str) -> InstanceRecord | None:
        """The running instance (with its addresses), or None if it never got there."""
        waiter = self._client.get_waiter("instance_running")
        try:
            waiter.wait(
                InstanceIds=[instance_id],
                WaiterConfig={"Delay": self.config.running_delay, "MaxAttempts": self.config.running_attempts},
            )
        except WaiterError as exc:
            _log.warning("%s did not reach running: %s", instance_id, exc)
            return None
        found = ec2.describe(self._client, self.region, [instance_id])
        return found[0] if found and found[0].state == "running" else None

    def _terminate(self, instance_ids: list[str]) -> None:
        if not instance_ids:
            return
        ec2.terminate(self._client, instance_ids)
        now = self._clock()
        with self._lock:
            for one in instance_ids:
                if self._live.pop(one, None) is not None:
                    self.stats.terminated += 1
                self.costs.end(one, now)
        _log.info("terminated %s", ", ".join(instance_ids))

    def _state(self, instance_id: str) -> str:
        found = ec2.describe(self._client, self.region, [instance_id])
        return found[0].state if found else "gone"

    def terminate_everything(self) -> None:
        """Stop launching, let calls on the wire land, terminate all this fleet launched; idempotent."""
        with self._lock:
            self._closed = True
            deadline = time.monotonic() + _INFLIGHT_WAIT_S
            while self._inflight and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            ids = list(self._live)
            sweep = not self._swept
            self._swept = True
        self._terminate(ids)
        if sweep:
            # Anything tagged with this fleet's id that the bookkeeping missed (a reply lost).
            stray = [r.id for r in ec2.find_tagged(self._client, self.region, {FLEET: self.fleet_id})]
            self._terminate(stray)

    # -- async surface ----------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool_closed:
            raise FleetClosed(f"fleet {self.fleet_id} is closed; start a new one")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=min(64, 2 * self.config.max_instances + 2), thread_name_prefix=f"fleet-{self.fleet_id}"
            )
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    @property
    def live(self) -> list[InstanceRecord]:
        """Instances launched and not yet terminated by this fleet."""
        with self._lock:
            return list(self._live.values())

    async def launch(self, name: str, *, task: str = "", rollout: int | None = None) -> Machine:
        """A healthy desktop (caps checked, unhealthy instances replaced); see the module doc."""
        registry.register(self)
        machine = Machine(name=name, task=task, rollout=rollout)
        await self._bring_up(machine)
        return machine

    async def _bring_up(self, machine: Machine) -> None:
        attempts = self.config.launch_attempts
        for attempt in range(1, attempts + 1):
            record = await self._launch_shielded(machine)
            try:
                running = await self._call(self._wait_running, record.id)
                if running is None:
                    self.stats.failed_to_start += 1
                    await self._call(self._terminate, [record.id])
                    continue
                url = self.resolve(running)
                healthy = await wait_healthy(
                    self.probe,
                    url,
                    timeout=self.config.healthy_timeout,
                    interval=self.config.probe_interval,
                    alive=functools.partial(self.is_running, record.id),
                )
            except BaseException:
                await asyncio.shield(self._call(self._terminate, [record.id]))
                raise
            if healthy:
                machine.instance, machine.url, machine.used = running, url, False
                return
            self.stats.unhealthy += 1
            _log.warning("%s never became healthy (attempt %d of %d); replacing it", record.id, attempt, attempts)
            await self._call(self._terminate, [record.id])
        raise UnhealthyDesktop(
            f"no instance of {machine.name} became healthy in {attempts} attempts: check the AMI "
            f"({self.config.image_id()}), that the host can reach port {self.config.server_port} "
            f"of the instances (security group, public_ip), or raise healthy_timeout"
        )

    async def state(self, instance_id: str) -> str:
        """The instance's EC2 state now (``gone`` when EC2 no longer knows it)."""
        return await self._call(self._state, instance_id)

    async def _launch_shielded(self, machine: Machine) -> InstanceRecord:
        """`_run_instance` on a thread; if cancelled meanwhile, what lands is terminated first."""
        call = asyncio.ensure_future(self._call(self._run_instance, machine))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                landed = await call
                await self._call(self._terminate, [landed.id])
            raise

    async def is_running(self, instance_id: str) -> bool:
        return await self.state(instance_id) == "running"

    async def revert(self, machine: Machine) -> bool:
        """Terminate and relaunch from the AMI; False (and nothing done) if never used."""
        if not machine.used and machine.instance is not None:
            self.stats.reverts_skipped += 1
            return False
        old = machine.instance_id
        machine.instance, machine.url = None, None
        if old is not None:
            await self._call(self._terminate, [old])
        await self._bring_up(machine)
        self.stats.reverts += 1
        return True

    async def relabel(self, machine: Machine, *, task: str, rollout: int | None) -> None:
        """Change the task and rollout a desktop is tagged with (now and for later relaunches)."""
        machine.task, machine.rollout = task, rollout
        if machine.instance is None:
            return
        tags = [{"Key": TASK, "Value": task[:256]}, {"Key": ROLLOUT, "Value": "" if rollout is None else str(rollout)}]
        await self._call(lambda: self._client.create_tags(Resources=[machine.instance_id], Tags=tags))

    async def release(self, machine: Machine) -> None:
        """Terminate the desktop's instance; the machine is empty afterwards."""
        old = machine.instance_id
        machine.instance, machine.url = None, None
        if old is not None:
            await self._call(self._terminate, [old])

    async def close(self) -> None:
        """Terminate everything this fleet launched; safe to call twice."""
        try:
            await asyncio.shield(asyncio.to_thread(self.terminate_everything))
        finally:
            registry.unregister(self)
            self._pool_closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=False)
