"""`Fleet`: launches OSWorld desktop instances on EC2, keeps them healthy, and never leaks them.

A launch is: check the caps, `run_instances` (as desktop-env launches, tagged), the TTL
schedule in the cloud (`aws.ttl`), the `instance_running` waiter, then the health check:
the in-VM server's screenshot, and every port OSWorld's controllers dial (`aws.health`). An
instance that never gets there is terminated and replaced, a bounded number of times; a
required port that is blocked stops the launch at once (the security group is everyone's).
When EC2 has no capacity, the next instance type or subnet the configuration names is
tried, with a warning. Revert terminates the instance and launches a fresh one from the
AMI, unless the desktop was never used and its instance still runs.

A watch (`aws.watch`) asks EC2 every ``watch_interval`` seconds whether each live instance
still runs, in use or not: a dead one stops costing at once, its desktop is marked lost (its
next call fails, its next revert relaunches) and the fleet's listeners (the pool) replace it.
Everything launched is remembered (and tagged with this fleet's id) so `close`, atexit and
the signal handlers can terminate it all; the blocking EC2 calls run on the fleet's threads.
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
from .errors import FleetCapReached, FleetClosed, FleetError, UnhealthyDesktop
from .health import HealthProbe, HttpProbe, check_ports, wait_healthy
from .machine import AddressResolver, FleetStats, Machine, server_address
from .tags import FLEET, ROLLOUT, TASK, InstanceRecord, instance_tags
from .ttl import TTLScheduler
from .watch import Watch

__all__ = ["Fleet"]

_log = logging.getLogger("aws.fleet")
T = TypeVar("T")
#: Seconds `terminate_everything` waits for `run_instances` calls already on the wire.
_INFLIGHT_WAIT_S = 60.0
LostListener = Callable[[Machine], None]


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
        session = ec2.aws_session(self.region, self.config.env_file)
        self._client = client if client is not None else ec2.ec2_client(
            self.region, self.config.endpoint_url, session=session, max_attempts=self.config.api_max_attempts)
        self.ttl = TTLScheduler(self.config, session, self.region)
        self._clock = clock
        self._live: dict[str, InstanceRecord] = {}
        self._machines: dict[str, Machine] = {}
        #: Instances the fleet itself is terminating (the watch must not call them dead).
        self._ending: set[str] = set()
        self.listeners: list[LostListener] = []
        self._lock = threading.Condition()
        self._inflight = 0
        self._closed = False
        self._swept = False
        self._pool: ThreadPoolExecutor | None = None
        self._pool_closed = False
        self._watch = Watch(self.fleet_id, self.config.watch_interval, live=lambda: self.live,
                            describe=lambda ids: ec2.describe(self._client, self.region, ids),
                            died=self.died, call=self._call)
        self._warned_ports: set[str] = set()

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- blocking parts (run on the fleet's threads, or in a signal handler's helper) -------

    def _run_instance(self, machine: Machine) -> InstanceRecord:
        """One instance for `machine`: the configured type and subnet, or the next that has capacity."""
        shortages: list[str] = []
        for subnet, instance_type in self.config.launch_choices():
            try:
                record = self._run_one(machine, subnet, instance_type)
            except ec2.CapacityShortage as exc:
                shortages.append(f"{exc.instance_type} in {exc.subnet}")
                _log.warning("%s; trying the next instance type or zone the fleet names", exc)
                continue
            if shortages:
                with self._lock:
                    self.stats.capacity_fallbacks += 1
                _log.warning("%s runs as %s in %s: EC2 had no capacity for %s", machine.name, instance_type,
                             subnet, ", ".join(shortages))
            return record
        raise FleetError(f"EC2 has no capacity for {', '.join(shortages)}: try again later, or name other "
                         f"types (instance_type_fallbacks) or subnets in other zones (subnet_fallbacks)")

    def _run_one(self, machine: Machine, subnet: str, instance_type: str) -> InstanceRecord:
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
            self.costs.check(instance_type, now, pending=self._inflight)
            self._inflight += 1
        record: InstanceRecord | None = None
        try:
            ttl = cfg.ttl_seconds
            tags = instance_tags(
                run_id=self.run_id, fleet_id=self.fleet_id, owner=self.owner, host=socket.gethostname(),
                pid=os.getpid(), task=machine.task, rollout=machine.rollout,
                expires_at=None if ttl is None else now + ttl,
            )
            request = ec2.launch_request(cfg, tags, uuid.uuid4().hex, subnet_id=subnet, instance_type=instance_type)
            reply = ec2.run_instance(self._client, request)
            record = InstanceRecord.from_ec2(reply["Instances"][0], self.region)
        finally:
            with self._lock:
                self._inflight -= 1
                if record is not None:
                    self._live[record.id] = record
                    self._machines[record.id] = machine
                    self.costs.start(record.id, record.instance_type or instance_type, self._clock())
                    self.stats.launched += 1
                    kind = record.instance_type or instance_type
                    self.stats.instance_types[kind] = self.stats.instance_types.get(kind, 0) + 1
                    machine.launches += 1
                self._lock.notify_all()
        _log.info("launched %s (%s, %s) for %s", record.id, record.instance_type, record.image_id, machine.name)
        if self._closed:
            self._terminate([record.id])
            raise FleetClosed("the fleet is shutting down; the instance just launched was terminated")
        if ttl is not None and cfg.ttl_schedule:
            self.ttl.schedule(record.id, ttl)  # at once, as desktop-env does, to survive an early crash
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

    def _forget(self, instance_id: str, when: float) -> Machine | None:
        """Drop a live instance from the books (its cost ends at `when`); its machine, if any."""
        with self._lock:
            gone = self._live.pop(instance_id, None)
            self.costs.end(instance_id, when)
            machine = self._machines.pop(instance_id, None)
        return machine if gone is not None else None

    def _terminate(self, instance_ids: list[str]) -> None:
        if not instance_ids:
            return
        with self._lock:
            self._ending.update(instance_ids)
        try:
            ec2.terminate(self._client, instance_ids)
            now = self._clock()
            for one in instance_ids:
                if self._forget(one, now) is not None:
                    with self._lock:
                        self.stats.terminated += 1
        finally:
            with self._lock:
                self._ending.difference_update(instance_ids)
        _log.info("terminated %s", ", ".join(instance_ids))

    def died(self, record: InstanceRecord) -> bool:
        """The watch found `record` not running: stop its cost, mark its desktop lost, tell
        listeners; False when it was the fleet's own termination (or already known)."""
        with self._lock:
            if record.id in self._ending:
                return False
        now = self._clock()
        machine = self._forget(record.id, min(record.changed_at or now, now))  # EC2 bills until it ended
        if machine is None:
            return False
        with self._lock:
            self.stats.died += 1
        if record.state in ("stopping", "stopped"):
            with contextlib.suppress(Exception):
                ec2.terminate(self._client, [record.id])  # a stopped instance still pays for its volume
        if machine.instance_id != record.id:
            return True  # died while being brought up: the health check replaces it
        machine.lost = f"instance {record.id} of {machine.name} is {record.state}"
        _log.warning("%s is %s behind the fleet's back: its desktop %s is replaced", record.id, record.state,
                     machine.name)
        for listener in list(self.listeners):
            try:
                listener(machine)
            except Exception as exc:  # a listener's failure must not stop the watch
                _log.error("a listener of lost desktops failed: %s", type(exc).__name__)
        return True

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
        if sweep and self.config.tag_instances:
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
        """Instances launched and not yet terminated (or found dead) by this fleet."""
        with self._lock:
            return list(self._live.values())

    async def launch(self, name: str, *, task: str = "", rollout: int | None = None) -> Machine:
        """A healthy desktop (caps checked, unhealthy instances replaced); see the module doc."""
        registry.register(self)
        self._watch.start()
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
                reach = self.resolve(running)
                healthy = await wait_healthy(
                    self.probe, reach.url, timeout=self.config.healthy_timeout, interval=self.config.probe_interval,
                    alive=functools.partial(self.is_running, record.id),
                )
                ports = await check_ports(self.config, running.id, reach, self._warned_ports) if healthy else {}
            except BaseException:
                await asyncio.shield(self._call(self._terminate, [record.id]))
                raise
            if healthy:
                machine.instance, machine.reach, machine.ports = running, reach, ports
                machine.used, machine.lost = False, None
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
        """Terminate and relaunch from the AMI; False (and nothing done) if never used and alive."""
        if not machine.used and machine.instance is not None and machine.lost is None:
            self.stats.reverts_skipped += 1
            return False
        old = machine.instance_id
        machine.instance, machine.reach = None, None
        if old is not None:
            await self._call(self._terminate, [old])
        await self._bring_up(machine)
        self.stats.reverts += 1
        return True

    async def relabel(self, machine: Machine, *, task: str, rollout: int | None) -> None:
        """Change the task and rollout a desktop is tagged with (now and for later relaunches)."""
        machine.task, machine.rollout = task, rollout
        if machine.instance is None or not self.config.tag_instances:
            return
        tags = [{"Key": TASK, "Value": task[:256]}, {"Key": ROLLOUT, "Value": "" if rollout is None else str(rollout)}]
        await self._call(lambda: self._client.create_tags(Resources=[machine.instance_id], Tags=tags))

    async def release(self, machine: Machine) -> None:
        """Terminate the desktop's instance; the machine is empty afterwards."""
        old = machine.instance_id
        machine.instance, machine.reach = None, None
        if old is not None:
            await self._call(self._terminate, [old])

    async def close(self) -> None:
        """Terminate everything this fleet launched; safe to call twice."""
        await self._watch.stop()
        try:
            await asyncio.shield(asyncio.to_thread(self.terminate_everything))
        finally:
            registry.unregister(self)
            self._pool_closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=False)
