"""The spare sandbox: revert swaps it in, and it is as fresh and as separate as a new start.

A revert that takes the spare must still give a fresh home and a new pid namespace, leave
nothing of the old desktop, and answer at once; the spare itself never shares a uid with a
live sandbox, is replaced after each revert, and goes with the desktop on close.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest
from local_helpers import inside

from environments.local import DesktopConfig, LocalDesktop
from environments.local import sandbox as sandbox_module
from environments.local.desktop import SPARE_NICE
from environments.local.procs import ProcInfo, alive, namespace_processes
from environments.local.sandbox import autogroup
from environments.local.spawner import run_blocking, start_in_background
from environments.walls.uids import LOCK_DIR, uid_busy

pytestmark = [pytest.mark.desktop, pytest.mark.integration]
# The kernel weighs sessions by their autogroups. A runner may itself sit in the default group
# (a container's, whose session was never renewed): it has no level, which counts as 0.
AUTOGROUPS = Path("/proc/self/autogroup").exists()


def _uid_free(uid: int) -> bool:
    """True when no lease holds ``uid`` (a new lock on its file succeeds) and nothing runs as it."""
    fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return not uid_busy(uid)


def _nice_levels(processes: list[ProcInfo]) -> set[int]:
    """Nice levels of every thread of ``processes``."""
    levels = set()
    for proc in processes:
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            levels.add(os.getpriority(os.PRIO_PROCESS, int(tid)))
    return levels


def _group_nice(processes: list[ProcInfo]) -> set[int | None]:
    """Nice levels of the scheduler autogroups of ``processes`` (the sessions' CPU weight)."""
    return {None if (group := autogroup(p.pid)) is None else group[1] for p in processes}


def _own_group_nice() -> int:
    """The nice level of our own autogroup (0 in the default group)."""
    own = autogroup()
    return 0 if own is None else own[1]


def _spare_gone(desktop: LocalDesktop, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while desktop.wait_spare(0) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not desktop.wait_spare(0)


async def test_revert_with_the_spare_is_fresh_new_and_replaces_the_spare(
    shared_desktops: list[LocalDesktop],
) -> None:
    desktop = shared_desktops[0]
    assert await run_blocking(lambda: desktop.wait_spare(60)), "the spare did not start"
    others = {d.uid for d in shared_desktops} | {d.spare_uid for d in shared_desktops}
    assert len(others) == 4, "two live sandboxes share a uid"
    spare_uid, spare_ns = desktop.spare_uid, desktop.spare_namespace
    ours = os.getpriority(os.PRIO_PROCESS, 0)  # a sandbox started live runs at its owner's level
    assert _nice_levels(desktop.spare_processes()) == {min(19, ours + SPARE_NICE)}, "the spare is not niced"
    own = autogroup()
    our_group = _own_group_nice()
    if AUTOGROUPS:
        assert _group_nice(desktop.spare_processes()) == {min(19, our_group + SPARE_NICE)}
        assert _group_nice(desktop.processes()) == {our_group}
    old_uid, old_ns = desktop.uid, desktop._namespace
    assert spare_ns is not None and spare_ns != old_ns
    seen = (await inside(desktop, "ps -eo uid= | sort -u")).split()
    assert str(spare_uid) not in seen, "the desktop sees its spare's processes"
    await inside(
        desktop,
        "echo before > ~/Desktop/left.txt; setsid env -i sleep 600 >/dev/null 2>&1 < /dev/null &",
    )
    before = {p.pid for p in desktop.processes()}
    seconds = await run_blocking(desktop.revert)
    assert desktop.last_revert_used_spare
    assert (desktop.uid, desktop._namespace) == (spare_uid, spare_ns)
    assert not namespace_processes(old_ns), "a process of the old desktop survived"
    assert not before & {p.pid for p in desktop.processes()}
    assert _nice_levels(desktop.processes()) == {ours}, "the desktop kept the spare's low priority"
    if AUTOGROUPS:
        assert _group_nice(desktop.processes()) == {our_group}, (
            "the desktop's session kept the spare's weight"
        )
        assert autogroup() == own, "our own weight changed"
    assert "left.txt" not in await inside(desktop, "ls -a ~/Desktop")
    assert (await inside(desktop, "pgrep -c sleep")).strip() == "0"
    assert seconds < 1.0, seconds
    # The next spare starts at once, on a uid no live sandbox holds; the old uid is free
    # (or already the new spare's, which is allowed only because nothing of it is left).
    # The old namespace is gone, so the kernel may give its inode number to the new spare's:
    # only the live desktop's namespace must differ.
    assert await run_blocking(lambda: desktop.wait_spare(60))
    assert desktop.spare_uid is not None and desktop.spare_uid != desktop.uid
    assert desktop.spare_namespace not in (None, spare_ns)
    assert desktop.spare_uid == old_uid or _uid_free(old_uid)
    # What the old sandbox had in the host folder went with it: one live socket, one spare's.
    left = sorted(p.name for p in desktop.dir.iterdir() if p.name.startswith(("sock-", "ctl.", "session-")))
    assert len(left) == 4 and "ctl.sock" in left, left
    assert len(list((desktop.dir / "homes").iterdir())) == 2


async def test_revert_to_another_snapshot_drops_the_spare_and_makes_one_for_it(
    shared_desktops: list[LocalDesktop],
) -> None:
    desktop = shared_desktops[1]
    assert await run_blocking(lambda: desktop.wait_spare(60))
    stale = desktop.spare_namespace
    assert stale is not None
    try:
        await run_blocking(lambda: desktop.revert("terminal"))
        assert not desktop.last_revert_used_spare
        assert not namespace_processes(stale), "the spare made for the old snapshot still runs"
        assert "Terminal" in await inside(desktop, "wmctrl -l")
        assert await run_blocking(lambda: desktop.wait_spare(60))
        await run_blocking(desktop.revert)
        assert desktop.last_revert_used_spare
        assert "Terminal" in await inside(desktop, "wmctrl -l")
    finally:
        await run_blocking(lambda: desktop.revert("mousepad"))
    assert "notes.txt" in await inside(desktop, "wmctrl -l")


async def test_a_dead_spare_is_replaced_by_a_new_sandbox_on_revert(
    shared_desktops: list[LocalDesktop],
) -> None:
    desktop = shared_desktops[0]
    assert await run_blocking(lambda: desktop.wait_spare(60))
    xvfb = [p.pid for p in desktop.spare_processes() if p.comm == "Xvfb"]
    assert xvfb
    dead = desktop.spare_namespace
    assert dead is not None
    os.kill(xvfb[0], 9)  # the spare's session notices and ends its sandbox
    assert await run_blocking(lambda: _spare_gone(desktop, 10.0)), "the spare lived on without its X server"
    await run_blocking(desktop.revert)
    assert not desktop.last_revert_used_spare
    # A new sandbox, not the dead spare: its namespace has live processes (the kernel may give
    # the dead one's inode number to it, so the number alone proves nothing).
    assert desktop.problem() is None and namespace_processes(desktop._namespace)
    assert xvfb[0] not in {p.pid for p in desktop.processes()}
    assert "notes.txt" in await inside(desktop, "wmctrl -l")


def test_close_stops_the_spare_and_frees_every_uid(env_base_dir: Path) -> None:
    desktop = LocalDesktop("spare-close", env_base_dir, DesktopConfig(snapshot="blank"), pool="tests-spare")
    try:
        desktop.start()
        assert desktop.wait_spare(60)
        uids = {desktop.uid, desktop.spare_uid}
        namespaces = [desktop._namespace, desktop.spare_namespace]
        assert None not in uids and len(uids) == 2
    finally:
        desktop.close()
    assert not [p for ns in namespaces if ns is not None for p in namespace_processes(ns)]
    assert all(_uid_free(uid) for uid in uids if uid is not None)
    assert not desktop.dir.exists()


def test_close_while_the_spare_is_still_starting_leaves_nothing(env_base_dir: Path) -> None:
    desktop = LocalDesktop(
        "spare-abort", env_base_dir, DesktopConfig(snapshot="mousepad"), pool="tests-spare"
    )
    try:
        desktop.start()
        spare = desktop._spare
        assert spare is not None
        deadline = time.monotonic() + 30
        while spare.pid is None and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = spare.pid
        assert pid is not None and spare.namespace is None, (
            "the spare was ready before close: nothing to abort"
        )
        uid = spare.uid
    finally:
        desktop.close()
    assert not Path(f"/proc/{pid}").exists()
    assert _uid_free(uid)
    assert not desktop.dir.exists()


def test_a_revert_before_the_spare_serves_waits_for_it_at_full_weight(env_base_dir: Path) -> None:
    desktop = LocalDesktop(
        "spare-early", env_base_dir, DesktopConfig(snapshot="mousepad"), pool="tests-spare"
    )
    try:
        desktop.start()
        assert not desktop.wait_spare(0), "the spare served already: nothing to wait for"
        desktop.revert()
        assert desktop.last_revert_used_spare
        assert _nice_levels(desktop.processes()) == {os.getpriority(os.PRIO_PROCESS, 0)}
        if AUTOGROUPS:
            assert _group_nice(desktop.processes()) == {_own_group_nice()}
    finally:
        desktop.close()


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_boosted_spare_runs_wholly_at_its_owners_weight(
    when: str, shared_desktops: list[LocalDesktop]
) -> None:
    """However early the revert boosts it (before its first process, or while it starts)."""
    sandbox = shared_desktops[0]._new_sandbox(False, nice=SPARE_NICE)
    try:
        if when == "before":
            sandbox.boost()
            sandbox.start()
        else:
            started = start_in_background(sandbox.start)
            while sandbox.pid is None and not started.done():
                time.sleep(0.001)
            sandbox.boost()
            started.result()
        assert _nice_levels(sandbox.processes()) == {os.getpriority(os.PRIO_PROCESS, 0)}
        if AUTOGROUPS:
            assert _group_nice(sandbox.processes()) == {_own_group_nice()}
    finally:
        sandbox.close()


def test_with_the_spare_off_revert_starts_a_new_sandbox(env_base_dir: Path) -> None:
    config = DesktopConfig(snapshot="blank", spare=False)
    desktop = LocalDesktop("spare-off", env_base_dir, config, pool="tests-spare")
    try:
        desktop.start()
        old = desktop._namespace
        old_pids = {p.pid for p in desktop.processes()}
        assert desktop.spare_uid is None and not desktop.wait_spare(0.1)
        desktop.revert()
        assert not desktop.last_revert_used_spare
        # A freed namespace's number may be given to the next one: compare the processes.
        assert old is not None and old_pids and not old_pids & {p.pid for p in desktop.processes()}
        assert all(not alive(pid) for pid in old_pids)
        assert desktop.spare_uid is None
    finally:
        desktop.close()


@pytest.mark.skipif(not AUTOGROUPS, reason="this kernel has no scheduler autogroups")
def test_a_runner_in_the_default_autogroup_still_weighs_its_spare_down(
    shared_desktops: list[LocalDesktop], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's runner often never started a session of its own: its autogroup file is
    empty. The spare's session still gets its own group at the lower weight, and a boost
    brings it back to the default level."""
    real = sandbox_module.autogroup
    monkeypatch.setattr(sandbox_module, "autogroup", lambda pid="self": None if pid == "self" else real(pid))
    sandbox = shared_desktops[0]._new_sandbox(False, nice=SPARE_NICE)
    try:
        sandbox.start()
        assert _group_nice(sandbox.processes()) == {SPARE_NICE}, "the spare's session kept full weight"
        sandbox.boost()
        assert _group_nice(sandbox.processes()) == {0}
    finally:
        sandbox.close()



def test_a_kill_waits_until_the_namespace_has_left_proc(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A killed init leaves /proc only after the kernel has reaped the rest of its namespace:
    on a loaded host that outlasts a few passes, and the kill must go on until it is empty."""
    ghost = ProcInfo(pid=4242, ppid=1, pgid=4242, comm="bwrap", uid=100005)
    seen: list[int] = []
    killed: list[list[int]] = []

    def slow_exit(namespace: int) -> list[ProcInfo]:
        seen.append(namespace)
        return [ghost] if len(seen) <= 12 else []

    monkeypatch.setattr(sandbox_module, "namespace_processes", slow_exit)
    monkeypatch.setattr(sandbox_module, "kill_pids", killed.append)
    sandbox_module.Sandbox._until_namespace_empty(7)
    assert len(seen) == 13 and killed == [[4242]] * 12

    monkeypatch.setattr(sandbox_module, "namespace_processes", lambda namespace: [ghost])
    monkeypatch.setattr(sandbox_module, "_GONE_S", 0.05)
    sandbox_module.Sandbox._until_namespace_empty(7)
    assert "pid namespace 7 outlived" in caplog.text and "4242 bwrap" in caplog.text
