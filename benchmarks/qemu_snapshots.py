"""Cold boot against revert from the live snapshot and against a fork, and memory per VM,
on one image in one run (QEMU; software emulation where KVM does not work).

1. Cold boot: a pool with an empty snapshot cache boots the image until its server answers
   and saves the boot (its seconds, the save's seconds and the state's size).
2. Revert: one VM of that pool is reverted ``--reverts`` times (write a file, revert, the
   file is gone), each timed until the server answers again.
3. Fork: ``--forks`` VMs restore the same snapshot at once (a new pool on the cached boot),
   timed each and all together; then a checkpoint of one VM and its restore in another.
4. Memory: the PSS and RSS of each QEMU process at rest after its restore, against the
   guest memory it was given.

Prints the figures and the ratios cold boot / revert and cold boot / fork side by side.
Needs root (each VM runs under a uid of its own) and the test image (built if missing).

    python benchmarks/qemu_snapshots.py [--image PATH] [--memory 1024] [--forks 2] [--reverts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from environments.qemu.environment import QemuEnvironment
from environments.qemu.image import ensure_test_image
from environments.qemu.provider import QemuProvider


def _memory_mib(pid: int) -> tuple[float, float]:
    """(PSS, RSS) of a process in MiB."""
    pss = rss = 0.0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            pss = int(line.split()[1]) / 1024
        elif line.startswith("Rss:"):
            rss = int(line.split()[1]) / 1024
    return pss, rss


async def _sh(env: QemuEnvironment, script: str) -> str:
    done = await env.client.execute(["bash", "-c", script], timeout=60)
    if done.status != "ok":
        raise RuntimeError(f"{script!r} failed in {env.name}: {done.stderr or done.stdout}")
    return done.stdout


async def main(args: argparse.Namespace) -> int:
    image = args.image or ensure_test_image(say=lambda line: print(line, file=sys.stderr)).path
    root = Path(tempfile.mkdtemp(prefix="qemu-bench-", dir="/var/tmp"))
    common = {"image": image, "memory_mib": args.memory, "cpus": args.cpus, "base_dir": root / "vms",
              "snapshot_cache": root / "snapshots", "watchdog": True}
    print(f"image {image} ({image.stat().st_size / 2**20:.0f} MiB), guest {args.memory} MiB, {args.cpus} vCPU, "
          f"load {os.getloadavg()[0]:.1f} at start")

    started = time.monotonic()
    async with QemuProvider(1, **common) as pool:  # type: ignore[arg-type]
        first_vm = time.monotonic() - started
        boot = pool.boot
        assert pool.accel is not None and boot.boot_seconds is not None
        print(f"accelerator {pool.accel.accel}: {pool.accel.reason}")
        env = await pool.acquire()
        assert isinstance(env, QemuEnvironment)
        reverts: list[float] = []
        for n in range(args.reverts):
            await _sh(env, f"echo {n} > ~/written-before-revert")
            t = time.monotonic()
            await env.revert()
            reverts.append(time.monotonic() - t)
            if (await _sh(env, "cat ~/written-before-revert 2>/dev/null || echo gone")).strip() != "gone":
                raise RuntimeError("a file written before the revert is still there")
        pool.release(env)
    cold = boot.boot_seconds

    forks: list[float] = []
    memory: list[tuple[float, float]] = []
    started = time.monotonic()
    async with QemuProvider(args.forks, **common) as pool:  # type: ignore[arg-type]
        all_forks = time.monotonic() - started
        forks = list(pool.restore_seconds)
        envs = [await pool.acquire() for _ in range(args.forks)]
        await asyncio.sleep(2.0)  # at rest
        for env in envs:
            assert isinstance(env, QemuEnvironment) and env.vm.process is not None
            memory.append(_memory_mib(env.vm.process.pid))
        source, other = envs[0], envs[-1]
        await _sh(source, "echo checkpointed > ~/progress")
        t = time.monotonic()
        checkpoint = await source.checkpoint("benchmark")
        checkpoint_s = time.monotonic() - t
        t = time.monotonic()
        await other.restore(checkpoint)
        fork_checkpoint_s = time.monotonic() - t
        if (await _sh(other, "cat ~/progress")).strip() != "checkpointed":
            raise RuntimeError("the fork of the checkpoint does not see its state")
        snapshot = pool.checkpoint_snapshot(checkpoint)
        checkpoint_mib = snapshot.state_bytes / 2**20
        for env in envs:
            pool.release(env)

    med_revert, med_fork = statistics.median(reverts), statistics.median(forks)
    pss = [m[0] for m in memory]
    rss = [m[1] for m in memory]
    print(f"cold boot until the server answers   {cold:8.1f} s  (first VM ready {first_vm:.1f} s after start)")
    print(f"live snapshot (boot)                 {boot.state_bytes / 2**20:8.0f} MiB of state")
    print(f"revert to the live snapshot          {med_revert:8.2f} s median, {max(reverts):.2f} s worst of {len(reverts)}")
    print(f"fork: VMs restored from one snapshot {med_fork:8.2f} s median each, {args.forks} at once in {all_forks:.1f} s")
    print(f"checkpoint a running VM              {checkpoint_s:8.2f} s ({checkpoint_mib:.0f} MiB), restored "
          f"elsewhere in {fork_checkpoint_s:.2f} s")
    print(f"memory per VM at rest (PSS / RSS)    {statistics.median(pss):8.0f} / {statistics.median(rss):.0f} MiB "
          f"(guest given {args.memory} MiB)")
    print(f"ratio cold boot / revert             {cold / med_revert:8.1f}x")
    print(f"ratio cold boot / fork               {cold / med_fork:8.1f}x")
    print(f"load {os.getloadavg()[0]:.1f} at end")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", type=Path, default=None, help="a disk image (default: the test image)")
    parser.add_argument("--memory", type=int, default=1024, help="guest memory in MiB")
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--forks", type=int, default=2)
    parser.add_argument("--reverts", type=int, default=5)
    sys.exit(asyncio.run(main(parser.parse_args())))
