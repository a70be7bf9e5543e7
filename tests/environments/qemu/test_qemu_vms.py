"""VMs under real QEMU: boot once, live snapshot, revert, forks that diverge, a checkpoint
mid-rollout that other VMs continue from, OSWorld's own controller driving a VM, a
local-suite task set up and scored by OSWorld's scorer in the VM, confinement."""

from __future__ import annotations

import asyncio
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from qemu_helpers import provider_for

from core.protocols import EnvironmentLost
from core.trajectory import Task
from environments.qemu.accel import choose_accel, probe_kvm
from environments.qemu.environment import QemuEnvironment
from environments.qemu.image import BuiltImage, boot_manifest
from environments.qemu.provider import VM_FIRST_UID, VM_SLOTS, QemuProvider
from environments.tasks import load_suite

# The first test of a session may build the image and boot it cold (minutes on a fresh machine).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]


async def _sh(env: QemuEnvironment, script: str) -> str:
    done = await env.client.execute(["bash", "-c", script], timeout=60)
    assert done.status == "ok", done
    return done.stdout


def _pixels(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


async def test_a_vm_boots_once_and_reverts_to_its_live_snapshot_in_seconds(two_vms: QemuProvider) -> None:
    boot = two_vms.boot
    assert boot.label == "boot" and boot.state_bytes > 10 * 2**20
    env = await two_vms.acquire()
    assert isinstance(env, QemuEnvironment)
    png = await env.screenshot()
    assert png.startswith(b"\x89PNG") and await env.screen_size() == (1920, 1080)
    await _sh(env, "echo before > ~/written-before; setsid sleep 1000 >/dev/null 2>&1 < /dev/null & sleep 0.2")
    assert "sleep 1000" in await _sh(env, "ps -eo args")
    started = time.monotonic()
    await env.revert()
    took = time.monotonic() - started
    assert await _sh(env, "ls ~/written-before 2>&1 || true") == "ls: cannot access '/home/user/written-before': No such file or directory\n"
    assert "sleep 1000" not in await _sh(env, "ps -eo args")
    assert took < 60, f"revert took {took:.1f} s"
    two_vms.release(env)


async def test_two_forks_of_one_snapshot_diverge_independently(two_vms: QemuProvider) -> None:
    first, second = await two_vms.acquire(), await two_vms.acquire()
    assert isinstance(first, QemuEnvironment) and isinstance(second, QemuEnvironment)
    assert first.vm.snapshot is second.vm.snapshot is two_vms.boot  # both forked from the boot snapshot
    await asyncio.gather(_sh(first, "echo one > ~/mark"), _sh(second, "echo two > ~/mark"))
    assert await _sh(first, "cat ~/mark") == "one\n"
    assert await _sh(second, "cat ~/mark") == "two\n"
    await _sh(first, "setsid xterm -T only-in-first -e sleep 600 >/dev/null 2>&1 < /dev/null & sleep 3")
    assert "only-in-first" in await _sh(first, "wmctrl -l")
    assert "only-in-first" not in await _sh(second, "wmctrl -l")
    assert first.vm.mac != second.vm.mac and first.vm.ports["server"] != second.vm.ports["server"]
    two_vms.release(first)
    two_vms.release(second)


async def test_a_checkpoint_at_step_t_continues_from_that_screen_in_another_vm(two_vms: QemuProvider) -> None:
    source, fork = await two_vms.acquire(), await two_vms.acquire()
    await _sh(source, "echo step-3 > ~/progress; setsid xterm -T checkpointed -geometry 60x10+200+200 -e sleep 600 >/dev/null 2>&1 < /dev/null & sleep 3")
    assert source.can_checkpoint()
    checkpoint = await source.checkpoint("step 3 of rollout 0")
    at_checkpoint = _pixels(await source.screenshot())
    await _sh(source, "echo step-4 > ~/progress")  # the source goes on after its checkpoint
    await fork.restore(checkpoint)
    assert await _sh(fork, "cat ~/progress") == "step-3\n"  # the fork starts at step 3, not at 4
    assert "checkpointed" in await _sh(fork, "wmctrl -l")
    forked = _pixels(await fork.screenshot())
    differing = int(np.any(np.asarray(at_checkpoint) != np.asarray(forked), axis=2).sum())
    assert differing < 0.001 * 1920 * 1080, f"{differing} pixels differ from the checkpoint's screen"
    assert await _sh(source, "cat ~/progress") == "step-4\n"
    two_vms.release(source)
    two_vms.release(fork)


async def test_osworld_python_controller_drives_a_vm_unchanged(two_vms: QemuProvider) -> None:
    from desktop_env.controllers.python import PythonController

    env = await two_vms.acquire()
    assert isinstance(env, QemuEnvironment)
    controller = PythonController(vm_ip="127.0.0.1", server_port=env.vm.ports["server"])
    shot = await asyncio.to_thread(controller.get_screenshot)
    assert shot is not None and shot.startswith(b"\x89PNG")
    await asyncio.to_thread(controller.execute_python_command,
                            "import pathlib; pathlib.Path('/home/user/from-controller').write_text('hi')")
    assert await _sh(env, "cat ~/from-controller") == "hi"
    await asyncio.to_thread(controller.execute_action, {"action_type": "MOVE_TO", "parameters": {"x": 300, "y": 200}})
    assert await env.cursor_position() == (300, 200)
    assert await asyncio.to_thread(controller.get_vm_screen_size) == {"width": 1920, "height": 1080}
    two_vms.release(env)


async def test_a_local_suite_task_is_set_up_and_scored_by_osworlds_scorer_in_the_vm(
    two_vms: QemuProvider, tmp_path: Path
) -> None:
    task: Task = next(t for t in load_suite() if t.id == "terminal-make-dirs")
    env = await two_vms.acquire()
    await env.prepare_task(task, tmp_path / "setup")
    assert "xterm -T Terminal" in await _sh(env, "ps -eo args")  # the setup's terminal, launched by OSWorld's controller
    assert await env.score_task(task, tmp_path / "unsolved", last_action="done") == 0.0
    await env.act("pyautogui.write('mkdir -p ~/projects/alpha ~/projects/beta\\n', interval=0.02)")
    for _ in range(50):
        if (await _sh(env, "ls -1 ~/projects 2>/dev/null || true")) == "alpha\nbeta\n":
            break
        await asyncio.sleep(0.2)
    assert await env.score_task(task, tmp_path / "solved", last_action="done") == 1.0
    two_vms.release(env)


async def test_a_killed_vm_is_lost_then_replaced_on_the_next_loan(two_vms: QemuProvider) -> None:
    env = await two_vms.acquire()
    assert isinstance(env, QemuEnvironment)
    assert env.vm.process is not None
    os.kill(env.vm.process.pid, 9)
    with pytest.raises(EnvironmentLost):
        for _ in range(50):
            await env.screenshot()
            await asyncio.sleep(0.1)
    name = env.name
    two_vms.release(env)
    fresh = await two_vms.acquire()
    other = await two_vms.acquire()
    assert name not in (fresh.name, other.name)  # the dead VM was replaced by a new one
    assert (await fresh.screenshot()).startswith(b"\x89PNG")
    two_vms.release(fresh)
    two_vms.release(other)


async def test_qemu_is_confined_and_the_image_is_never_written(two_vms: QemuProvider, test_image: BuiltImage) -> None:
    before = (test_image.path.stat().st_mtime_ns, test_image.path.stat().st_size)
    env = await two_vms.acquire()
    assert isinstance(env, QemuEnvironment) and env.vm.process is not None
    status = _status(env.vm.process.pid)
    uid = int(status["Uid"].split()[0])
    assert VM_FIRST_UID <= uid < VM_FIRST_UID + VM_SLOTS
    assert status["Groups"].strip() == "" and status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
    assert status["CapEff"].strip("0\n ") == "" and status["CapBnd"].strip("0\n ") == ""
    # no monitor socket on disk: the VM's folder is root-only and holds no socket at all
    assert (env.vm.folder.stat().st_mode & 0o077) == 0 and env.vm.folder.stat().st_uid == 0
    assert not [p for p in env.vm.folder.rglob("*") if p.is_socket()]
    # its forwarded ports listen on 127.0.0.1 only
    listening = await asyncio.to_thread(Path("/proc/net/tcp").read_text)
    for port in env.vm.ports.values():
        assert f"0100007F:{port:04X} 00000000:0000 0A" in listening
        assert f"00000000:{port:04X} 00000000:0000 0A" not in listening
    # the guest cannot reach the host (no NAT without a task that needs it)
    reach = await _sh(env, "python3 -c \"import socket; socket.create_connection(('10.0.2.2', 22), 3)\" 2>&1 || true")
    assert "Network is unreachable" in reach or "timed out" in reach or "refused" in reach
    await _sh(env, "head -c 4000000 /dev/urandom > ~/big")
    two_vms.release(env)
    assert (test_image.path.stat().st_mtime_ns, test_image.path.stat().st_size) == before
    assert test_image.path.stat().st_mode & 0o222 == 0


def test_kvm_is_probed_by_booting_a_kernel_and_the_verdict_is_cached(test_image: BuiltImage, tmp_path: Path) -> None:
    manifest = boot_manifest(test_image.path)
    assert manifest is not None
    started = time.monotonic()
    choice = choose_accel(manifest["kernel"], manifest.get("initrd"), tmp_path)
    first = time.monotonic() - started
    again = choose_accel(manifest["kernel"], manifest.get("initrd"), tmp_path)
    assert again == choice and len(list(tmp_path.glob("accel-*.json"))) == 1
    if os.path.exists("/dev/kvm") and choice.accel == "tcg":  # this machine: a KVM guest hangs or aborts
        assert "KVM" in choice.reason or "kvm" in choice.reason
        assert first < 40
    assert choose_accel(manifest["kernel"], None, tmp_path, want="tcg").accel == "tcg"
    assert probe_kvm.__doc__


async def test_a_vm_with_the_internet_still_cannot_reach_this_machine(
    test_image: BuiltImage, tmp_path: Path, snapshot_cache: Path
) -> None:
    """With the NAT (``network: on``), the guest's gateway 10.0.2.2 is this machine's
    loopback: a server listening there must not be reached (the VMs' nftables table)."""
    import socket

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(8)
    port = server.getsockname()[1]
    try:
        async with provider_for(test_image, tmp_path / "vms", snapshot_cache, 1, network="on") as provider:
            env = await provider.acquire()
            assert isinstance(env, QemuEnvironment) and env.vm.internet
            probe = (f"python3 -c \"import socket\ntry:\n socket.create_connection(('10.0.2.2', {port}), 5); "
                     "print('reached')\nexcept OSError as e: print('blocked', e)\"")
            out = await _sh(env, probe)
            assert out.startswith("blocked"), out
            assert (await env.worker_facts()).network is True
            provider.release(env)
    finally:
        server.close()


async def test_a_tasks_set_up_state_is_snapshotted_once_and_forked(
    test_image: BuiltImage, tmp_path: Path, snapshot_cache: Path
) -> None:
    task: Task = next(t for t in load_suite() if t.id == "terminal-make-dirs")
    async with provider_for(test_image, tmp_path / "vms", snapshot_cache, 2, snapshot_after_setup=True) as provider:
        first, second = await provider.acquire(), await provider.acquire()
        assert isinstance(first, QemuEnvironment) and isinstance(second, QemuEnvironment)
        await asyncio.gather(first.prepare_task(task, tmp_path / "a"), second.prepare_task(task, tmp_path / "b"))
        taken = provider.task_snapshot(task.id, False)
        assert taken is not None and taken.label == f"task {task.id}" and taken.parent == provider.boot.id
        assert first.vm.snapshot is second.vm.snapshot is taken  # one VM set the task up, both run from its state
        for env in (first, second):
            assert "xterm -T Terminal" in await _sh(env, "ps -eo args")
        provider.release(first)
        provider.release(second)
