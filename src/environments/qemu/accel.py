"""KVM where it works, software emulation (TCG) otherwise, decided by booting a kernel.

``/dev/kvm`` existing and opening proves little: on some hosts (nested virtualisation
without the features a guest kernel probes) a KVM guest hangs right after the kernel
decompresses, or QEMU aborts setting a CPU register. So the probe boots a real kernel under
KVM with an init that cannot exist: a working KVM reaches the kernel's panic (QEMU then
exits, ``-no-reboot``) within a second or two; a hang is cut at `PROBE_SECONDS`. The verdict
is cached per machine boot, QEMU build and kernel, and said once, with the cost of
emulation when it falls back.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .machine import Accel

__all__ = ["PROBE_SECONDS", "AccelChoice", "choose_accel", "probe_kvm"]

#: How long a probe boot may take before KVM is declared unusable (TCG reaches the panic in
#: about 3-5 s on an idle 2-core machine; KVM in about 1 s).
PROBE_SECONDS = 20.0
#: What a software-emulated guest costs against KVM, for the one line that says so (a
#: guest under TCG runs roughly 5-20 times slower; measured here: benchmarks/qemu_snapshots.py).
TCG_COST = "software emulation (TCG): no KVM, so the guest runs about 5-20x slower than under KVM"


@dataclass(frozen=True, slots=True)
class AccelChoice:
    accel: Accel
    reason: str
    """Why: KVM works, or what the probe saw."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _qemu_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def probe_kvm(kernel: str, initrd: str | None, *, binary: str = "qemu-system-x86_64",
              timeout: float = PROBE_SECONDS) -> AccelChoice:
    """Boot `kernel` under KVM until its init fails; KVM if that happens in time."""
    if not os.path.exists("/dev/kvm"):
        return AccelChoice("tcg", "/dev/kvm does not exist")
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as e:
        return AccelChoice("tcg", f"/dev/kvm cannot be opened ({e.strerror})")
    os.close(fd)
    argv = [binary, "-nodefaults", "-no-user-config", "-display", "none", "-machine", "pc", "-accel", "kvm",
            "-cpu", "host", "-m", "256", "-kernel", kernel, "-no-reboot", "-serial", "stdio",
            "-append", "console=ttyS0 panic=-1 rdinit=/agent-s3-kvm-probe"]
    if initrd:
        argv += ["-initrd", initrd]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        seen = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        last = seen.strip().splitlines()[-1:] or ["no output"]
        return AccelChoice("tcg", f"a KVM guest hangs here (no kernel panic within {timeout:g} s; "
                                  f"its console stopped at: {last[0][:80]!r})")
    seconds = time.monotonic() - started
    if "Kernel panic" in done.stdout or "Linux version" in done.stdout:
        return AccelChoice("kvm", f"KVM works (a probe kernel booted in {seconds:.1f} s)")
    why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
    return AccelChoice("tcg", f"QEMU cannot run a KVM guest here: {why[:160]}")


def choose_accel(kernel: str | None, initrd: str | None, cache: Path, *, want: str = "auto",
                 binary: str = "qemu-system-x86_64") -> AccelChoice:
    """The accelerator for this machine: `want` if ``kvm`` or ``tcg``, else the probe's
    verdict (cached in `cache` per machine boot, QEMU build and kernel). Without a kernel to
    probe with, KVM is taken when /dev/kvm opens (a hang then shows as a boot timeout)."""
    if want == "tcg":
        return AccelChoice("tcg", "software emulation was asked for (environment.accel: tcg)")
    if want == "kvm":
        return AccelChoice("kvm", "KVM was asked for (environment.accel: kvm)")
    if kernel is None:
        try:
            os.close(os.open("/dev/kvm", os.O_RDWR))
        except OSError as e:
            return AccelChoice("tcg", f"/dev/kvm cannot be opened ({e.strerror or e})")
        return AccelChoice("kvm", "/dev/kvm opens (no kernel to probe with)")
    key = hashlib.sha256(json.dumps([_boot_id(), _qemu_version(binary), kernel,
                                     os.stat(kernel).st_mtime_ns]).encode()).hexdigest()[:16]
    path = cache / f"accel-{key}.json"
    try:
        known = json.loads(path.read_text())
        return AccelChoice(known["accel"], known["reason"])
    except (OSError, ValueError, KeyError):
        pass
    choice = probe_kvm(kernel, initrd, binary=binary)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"accel": choice.accel, "reason": choice.reason}))
    return choice
