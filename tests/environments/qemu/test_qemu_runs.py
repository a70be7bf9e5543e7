"""Runs on QEMU VMs through the runner and the command line: a wide run (N rollouts forked
from one snapshot), a VM killed mid-rollout and that rollout redone on a fresh VM, and
``bench osworld --env qemu`` on a task of the local suite, scored in the VM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.llm import Ledger
from core.trajectory import RunLayout
from environments.qemu.image import BuiltImage, default_cache
from environments.tasks import SUITE_DIR
from runner.config import load_run_config
from runner.demo_policy import register_demo
from runner.environments import open_pool
from runner.models import build_models
from runner.rollout import StepEvent
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling

# The first test of a session may build the image and boot it cold (minutes on a fresh machine).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

CLI = Path(sys.executable).with_name("agent-s3")
TASK = "terminal-make-dirs"


def _vm_settings(image: BuiltImage, tmp_path: Path) -> list[str]:
    return ["-c", "environment.memory_mib=1024", "-c", "environment.cpus=1",
            "-c", f"environment.base_dir={tmp_path / 'vms'}",
            "-c", f"environment.snapshot_cache={default_cache() / 'snapshots'}", "--settle", "1"]


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
                          check=False)


def test_a_wide_run_on_qemu_through_the_cli(test_image: BuiltImage, tmp_path: Path) -> None:
    done = _cli(["run", "--env", "qemu", "--image", str(test_image.path), "--task", TASK, "--model", "scripted/demo",
                 "--rollouts", "2", "--judge", "none", "--out", str(tmp_path / "runs"), "--run-id", "wide",
                 *_vm_settings(test_image, tmp_path)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    flat = " ".join(done.stdout.split())
    assert "under QEMU" in flat
    layout = RunLayout(tmp_path / "runs", "wide")
    result = layout.task(TASK).read_result()
    assert result is not None and result.scores == {0: 1.0, 1: 1.0}
    headers = layout.task(TASK).headers()
    names = {h.environment for h in headers.values()}
    assert len(names) == 2 and all(str(name).startswith("qemu-") for name in names)
    config = json.loads((layout.path / "config.json").read_text())
    assert config["environment"]["kind"] == "qemu" and config["worker"]["facts"]["user_name"] == "user"
    assert not list((tmp_path / "vms" / "pools").iterdir())  # every VM was stopped with the run


async def test_a_vm_killed_mid_rollout_is_redone_on_a_fresh_vm(test_image: BuiltImage, tmp_path: Path) -> None:
    register_demo(TASK)
    cfg = load_run_config([{
        "policy": {"model": "scripted/demo"},
        "environment": {"kind": "qemu", "image": str(test_image.path), "memory_mib": 1024, "cpus": 1,
                        "base_dir": str(tmp_path / "vms"), "snapshot_cache": str(default_cache() / "snapshots")},
        "rollout": {"settle_seconds": 1.0},
        "strategy": "wide", "wide": {"rollouts": 2, "seed": 5, "judge": "none", "max_retries": 1},
    }])  # fmt: skip
    killed: list[int] = []
    killed_names: list[str] = []
    holder: list[Any] = []

    async def kill_once(event: StepEvent) -> None:
        if event.rollout != 1 or killed:
            return
        header = event.rollout_dir.read_info()
        env = next(e for e in holder[0].environments if e.name == header.environment)
        killed.append(env.vm.process.pid)
        killed_names.append(env.name)
        os.kill(killed[-1], signal.SIGKILL)  # QEMU itself: the VM is gone mid-rollout

    task = resolve_task(TASK)
    layout = RunLayout(tmp_path / "runs", "killed", durable=False)
    layout.path.mkdir(parents=True)
    ledger = Ledger(layout.ledger_path)
    models = build_models(cfg, ledger)
    strategy = WideScaling()
    try:
        async with open_pool(cfg.environment, size=2) as pool:
            holder.append(pool)
            run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger,
                          hooks=[kill_once])
            result = await strategy(run)
            qemu_pids = {e.name: e.vm.process.pid for e in pool.environments if e.vm.process is not None}
    finally:
        await strategy.aclose()
        await models.aclose()
    assert killed
    headers = layout.task(TASK).headers()
    assert headers[1].attempts == 2 and headers[1].status == "done"
    # The retry ran on a live VM: another one (rollout 0's, once free) or the killed one's
    # replacement, never the dead QEMU process.
    assert headers[1].environment is not None
    assert headers[1].environment != killed_names[0] or qemu_pids[killed_names[0]] != killed[0]
    assert result.scores == {0: 1.0, 1: 1.0}


def test_bench_osworld_on_qemu_scores_a_task_in_the_vm(test_image: BuiltImage, tmp_path: Path) -> None:
    done = _cli(["bench", "osworld", "--tasks", str(SUITE_DIR / "test_local.json"), "--examples",
                 str(SUITE_DIR / "examples"), "--domain", "terminal", "--limit", "1", "--env", "qemu", "--image",
                 str(test_image.path), "--model", "scripted/demo", "--out", str(tmp_path / "runs"), "--run-id", "b",
                 *_vm_settings(test_image, tmp_path)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "runs" / "b" / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 1 and summary["overall"]["selected"] == 1.0, summary


def test_branching_continues_a_rollout_from_its_checkpoint_as_k_forks(test_image: BuiltImage, tmp_path: Path) -> None:
    """The demo plan makes the folders at step 1 and checks them at steps 2-3: with the
    checkpoint after step 1, both branches only check, and score 1 because the folders the
    shared prefix made are in the state they continue from."""
    done = _cli(["run", "--env", "qemu", "--image", str(test_image.path), "--task", TASK, "--model", "scripted/demo",
                 "--strategy", "branch", "--branch-at", "1", "--branches", "2", "--out", str(tmp_path / "runs"),
                 "--run-id", "branch", *_vm_settings(test_image, tmp_path)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    task = RunLayout(tmp_path / "runs", "branch").task(TASK)
    headers = task.headers()
    assert sorted(headers) == [0, 1, 2]
    assert headers[0].step_count == 1 and "shared prefix" in str(headers[0].reason)
    for k in (1, 2):
        assert headers[k].branch_of == 0 and headers[k].branch_at == 1 and headers[k].status == "done"
        assert headers[k].step_count == 2  # its own steps only: the prefix is stored once, in rollout 0
        assert headers[k].score == 1.0
    result = task.read_result()
    assert result is not None and result.scores == {1: 1.0, 2: 1.0} and result.selected in (1, 2)
    selection = json.loads((task.path / "selection.json").read_text())
    assert sorted(selection["candidates"]) == [1, 2]


def _qemus() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"qemu-system" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _guests(pids: set[int]) -> list[str]:
    """The VM names (``-name guest=NAME``) of QEMU processes."""
    names = []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        names += [a.removeprefix("guest=") for a in argv if a.startswith("guest=")]
    return names


def test_env_up_ls_down_keep_vms_running_between_commands(test_image: BuiltImage, tmp_path: Path) -> None:
    base = ["--base-dir", str(tmp_path / "envs")]
    before = _qemus()
    up = _cli(["env", "up", "--env", "qemu", "--image", str(test_image.path), "-n", "2", *base,
               "-c", "environment.memory_mib=1024", "-c", "environment.cpus=1",
               "-c", f"environment.base_dir={tmp_path / 'vms'}"], tmp_path)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        names = [line.split("\t")[0] for line in up.stdout.splitlines()]
        assert len(names) == 2 and sorted(_guests(_qemus() - before)) == sorted(names)  # they outlive the command
        listed = _cli(["env", "ls", *base], tmp_path).stdout
        assert all(name in listed for name in names) and "http://127.0.0.1:" in listed
    finally:
        down = _cli(["env", "down", "--all", *base], tmp_path)  # never leave the host behind
    assert down.returncode == 0 and not set(_guests(_qemus())) & set(names)
    assert "no desktops running" in _cli(["env", "ls", *base], tmp_path).stdout


def test_vms_of_a_killed_owner_die_with_it(test_image: BuiltImage, tmp_path: Path) -> None:
    """The owner killed outright: its QEMUs die (parent-death signal) and the watchdog
    removes the pool's folder (its overlays)."""
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from environments.qemu.provider import QemuProvider\n"
        "async def main():\n"
        f"    async with QemuProvider(1, image=Path({str(test_image.path)!r}), memory_mib=1024, cpus=1,\n"
        f"                            base_dir=Path({str(tmp_path / 'vms')!r})) as pool:\n"
        "        env = await pool.acquire()\n"
        "        print('ready', env.vm.process.pid, flush=True)\n"
        "        await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line.startswith("ready"), line
        qemu = int(line.split()[1])
        pools = list((tmp_path / "vms" / "pools").iterdir())
        assert len(pools) == 1 and Path(f"/proc/{qemu}").exists()
        owner.kill()
        owner.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (Path(f"/proc/{qemu}").exists() or pools[0].exists()):
            time.sleep(0.2)
        assert not Path(f"/proc/{qemu}").exists(), "QEMU outlived its owner"
        assert not pools[0].exists(), "the watchdog left the pool's overlays behind"
    finally:
        owner.kill()
