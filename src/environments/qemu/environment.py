"""`QemuEnvironment`: an OSWorld-protocol desktop in a VM of the pool, reverted by restoring
a live snapshot and able to checkpoint itself mid-rollout.

The VM's server is reached on the host's 127.0.0.1 (QEMU forwards the guest's port 5000 to
it, and 9222 and 8080 for the browser's and VLC's getters), so OSWorld's own setup
controller, getters and metrics run against it as against OSWorld's Docker provider.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from core.protocols import Checkpoint, WorkerFacts
from core.trajectory import Task
from environments.osworld import OSWorldClient, OSWorldDesktop
from environments.osworld.desktop import osworld_image_facts
from environments.tasks.door import Endpoint
from environments.tasks.handling import needs_client, score_with, set_up_with
from environments.tasks.network import needs_network

from .snapshot import Snapshot
from .vm import QemuVM

__all__ = ["QemuEnvironment", "VMHost"]


class VMHost(Protocol):
    """What a VM's environment asks of the pool that lent it (`QemuProvider`): restores,
    set-up snapshots and checkpoints. Typed here so the environment never imports the pool
    that builds it."""

    leaderboard_note: str | None

    @property
    def boot(self) -> Snapshot: ...

    def internet_for(self, needs: bool | None) -> bool: ...

    async def restore(self, env: Any, snapshot: Snapshot, *, internet: bool) -> None: ...

    def task_snapshot(self, task_id: str, internet: bool) -> Snapshot | None: ...

    def task_setup(self, task_id: str, internet: bool) -> AbstractAsyncContextManager[Snapshot | None]: ...

    async def after_setup(self, env: Any, task_id: str, internet: bool) -> None: ...

    async def checkpoint(self, env: Any, label: str) -> Checkpoint: ...

    def checkpoint_snapshot(self, checkpoint: Checkpoint) -> Snapshot: ...


class QemuEnvironment(OSWorldDesktop):
    """One VM of a `QemuProvider` (its `VMHost`), lent as an environment."""

    def __init__(self, vm: QemuVM, provider: VMHost, *, on_close: Callable[[], Awaitable[None]] | None = None,
                 with_sandbox: bool = True, action_timeout: float = 30.0) -> None:
        client = OSWorldClient(vm.url)
        facts = osworld_image_facts("ubuntu")
        super().__init__(client, name=vm.name, platform="ubuntu", revert=self._revert_to_boot, on_close=on_close,
                         with_sandbox=with_sandbox, action_timeout=action_timeout,
                         facts=replace(facts, leaderboard_note=provider.leaderboard_note))
        self.vm = vm
        self.provider = provider
        self.lost: str | None = None
        """Why the VM died under a rollout (None while it runs)."""

    @property
    def endpoint(self) -> Endpoint:
        """OSWorld's setup controller and getters reach the VM here."""
        ports = self.vm.ports
        return Endpoint("127.0.0.1", ports["server"], chromium_port=ports["chromium"], vlc_port=ports["vlc"])

    async def _revert_to_boot(self) -> None:
        await self.provider.restore(self, self.provider.boot, internet=self.provider.internet_for(None))

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        """Restore the boot snapshot (with the NAT when the task needs the internet and the
        network mode allows), run the setup through OSWorld's controller, and, with
        ``snapshot_after_setup``, fork the task's later rollouts from the set-up state."""
        internet = self.provider.internet_for(needs_network(task))
        saved = self.provider.task_snapshot(task.id, internet)
        if saved is not None:
            await self.provider.restore(self, saved, internet=internet)
            return
        async with self.provider.task_setup(task.id, internet) as take:
            if take is not None:  # another VM set it up meanwhile
                await self.provider.restore(self, take, internet=internet)
                return
            await self.provider.restore(self, self.provider.boot, internet=internet)
            if needs_client(task):
                await set_up_with(self.endpoint, task, cache_dir, password=self._facts.password)
            await self.provider.after_setup(self, task.id, internet)

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        return await score_with(self.endpoint, task, cache_dir, last_action=last_action, password=self._facts.password)

    async def worker_facts(self) -> WorkerFacts:
        return replace(self._facts, network=self.vm.internet)

    def address(self) -> str:
        return self.vm.url

    # -- branching ----------------------------------------------------------------------

    def can_checkpoint(self) -> bool:
        return True

    async def checkpoint(self, label: str) -> Checkpoint:
        """Save this VM now as a snapshot of the pool (any VM of it can restore it) and go on from it."""
        return await self.provider.checkpoint(self, label)

    async def restore(self, checkpoint: Checkpoint) -> None:
        """Become the VM `checkpoint` saved (a fork of it when another VM took it)."""
        snapshot = self.provider.checkpoint_snapshot(checkpoint)
        await self.provider.restore(self, snapshot, internet=self.vm.internet)

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.vm.close()

    def reset_after_restore(self) -> None:
        """Forget what was learnt of the VM before it was restored (its screen size)."""
        self._size = None

    def problem(self) -> str | None:
        """Why this VM cannot be lent as it is (its QEMU died), or None."""
        if self.lost:
            return self.lost
        if self.vm.process is not None and not self.vm.process.alive():
            return f"QEMU of {self.name} exited: {self.vm.process.stderr_tail() or 'no message'}"
        return None

