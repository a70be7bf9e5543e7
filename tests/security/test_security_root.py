"""The desktop's root (``sudo`` with OSWorld's password) is root of that desktop alone.

Root of a desktop is uid 0 of the desktop's own user namespace: an unprivileged host uid of
the desktops' range, a container's capabilities (no CAP_SYS_ADMIN), ``no_new_privs``. Every
attack here runs as that root, the way a model gets it (``echo password | sudo -S ...`` from
the coding agent's code, which runs in the desktop's session), and then looks at the host:
host files, host and other desktops' processes and homes must be as they were. Each attack
also shows it ran as root inside (so a broken ``sudo`` cannot pass as a held wall).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from security_helpers import Canary, Tally, shell

import environments
from core.protocols import EnvironmentLost, ExecResult
from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.server_env import server_environment
from environments.local.spawner import run_blocking
from environments.walls.system import desktop_site

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]
#: The project's sources on the host (shown read-only inside at /opt/agent-s3/src).
_SOURCES = str(Path(environments.__file__).resolve().parent.parent)


async def as_root(env: LocalEnvironment, script: str, timeout: float = 60.0) -> ExecResult:
    """``script`` run by bash as the desktop's root, through sudo from the coding agent's code."""
    box = env.sandbox()
    assert box is not None
    return await box.run("bash", f"echo password | sudo -S -p '' bash -c {shlex.quote(script)} 2>&1", timeout=timeout)


def _exists(folder: str, name: str) -> bool:
    return os.path.exists(os.path.join(folder, name))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _host_targets() -> dict[Path, str]:
    """Host files a desktop's root sees (read-only binds) and must never change."""
    src = Path(environments.__file__).resolve().parent
    files = [
        src / "local" / "rootd.py",
        src / "local" / "sudo_client.py",
        desktop_site() / "pyautogui" / "__init__.py",
        Path("/etc/hostname") if Path("/etc/hostname").exists() else Path("/etc/os-release"),
        Path(sys.executable).resolve(),
    ]
    return {path: _digest(path) for path in files}


async def test_root_is_uid_0_inside_and_an_unprivileged_uid_outside(pair: list[LocalEnvironment], tally: Tally) -> None:
    env = pair[0]
    name = f"root-made-{secrets.token_hex(3)}"
    # The sleeper (a process of the desktop's root, alive while its owner is looked up below)
    # lets go of the output, which it held open for its 30 s.
    done = await as_root(
        env, f"id -u; grep ^Cap /proc/self/status; touch /home/user/{name}; sleep 30 </dev/null >/dev/null 2>&1 & echo PID $!"
    )
    lines = done.stdout.split()
    assert lines[0] == "0", done.stdout  # it ran as root inside
    caps = int(done.stdout.split("CapEff:")[1].split()[0], 16)
    escaped = None
    if caps & (1 << 21) or caps & (1 << 12) or caps & (1 << 19) or caps & (1 << 16):
        escaped = f"the desktop's root holds SYS_ADMIN, NET_ADMIN, SYS_PTRACE or SYS_MODULE ({caps:#x})"
    owners = {p.uid for p in env.desktop.processes()}
    if 0 in owners:
        escaped = "a process of the desktop runs as the host's root"
    root_uid = env.desktop._live.root_uid if env.desktop._live else None
    if root_uid is None or root_uid < 100000 or root_uid not in owners:
        escaped = f"the desktop's root is not an unprivileged host uid of the desktops' range ({root_uid})"
    pid = env.desktop.infra_pids()["server"]
    made = os.stat(f"/proc/{pid}/root/home/user/{name}")
    if made.st_uid == 0:
        escaped = "a file the desktop's root made belongs to the host's root"
    tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_root_cannot_change_or_read_host_files(
    pair: list[LocalEnvironment], canary: Canary, tally: Tally
) -> None:
    env = pair[0]
    before = _host_targets()
    mark = f"root-was-here-{secrets.token_hex(3)}"
    targets = " ".join(shlex.quote(str(p)) for p in before)
    inside = [
        # every host file the desktop shows, written, truncated, re-owned, unlinked
        f"for f in /usr/bin/python3.11 /etc/hostname /etc/os-release /opt/agent-s3/src/environments/local/rootd.py "
        f"/usr/local/lib/python3*/dist-packages/pyautogui/__init__.py /usr/local/bin/sudo; do "
        f"echo {mark} >> $f; chown root $f; chmod 777 $f; rm -f $f; done",
        f"for d in /usr/bin /etc /opt/agent-s3/src /usr/local/lib/python3*/dist-packages /var/lib/dbus; do "
        f"echo {mark} > $d/{mark}; done",
        # remount what is read-only, mount over it, bind something else
        "mount -o remount,rw /usr; mount -o remount,rw /opt/agent-s3/src; mount -t tmpfs none /etc; "
        "umount -l /usr/local/bin/sudo; umount /opt/agent-s3/src",
        # host secrets and the host's paths
        f"cat /etc/shadow; ls /work /root/.pyenv {shlex.quote(str(canary.folder))}; cat {shlex.quote(str(canary.secret))}",
        # the host's own files by their host paths, from root's view
        f"for f in {targets}; do echo {mark} >> $f; done",
    ]
    for script in inside:
        done = await as_root(env, script + "; id -u")
        assert done.stdout.strip().splitlines()[-1] == "0", done.stdout  # the attack ran as root
        escaped = None
        if canary.changed() or canary.secret_text in done.stdout:
            escaped = "the host canary was read or changed"
        elif _host_targets() != before:
            escaped = "a host file changed"
        elif "root:" in done.stdout and "$" in done.stdout.split("root:", 1)[1][:40]:
            escaped = "the host's /etc/shadow was read"
        else:
            appeared = [folder for folder in ("/usr/bin", "/etc", _SOURCES) if _exists(folder, mark)]
            if appeared:
                escaped = f"a file appeared in the host's {appeared[0]}"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_root_cannot_leave_its_namespaces(pair: list[LocalEnvironment], tally: Tally) -> None:
    """New user, mount or network namespaces, device nodes, kernel settings, the chroot
    escape and file handles: each refused, and / stays the desktop's own."""
    env = pair[0]
    chroot_escape = (
        "python3 -c \"import os; os.makedirs('/tmp/jail', exist_ok=True); fd = os.open('/', os.O_RDONLY); "
        "os.chroot('/tmp/jail'); os.fchdir(fd); [os.chdir('..') for _ in range(64)]; os.chroot('.'); "
        "print('ESCAPE-ROOT', sorted(os.listdir('/')))\""
    )
    attempts = {
        "user namespace": "unshare -U -r true && echo MADE",
        "mount namespace": "unshare -m true && echo MADE",
        "network namespace": "unshare -n true && echo MADE",
        "device node": "mknod /tmp/disk b 8 0 && echo MADE",
        "kernel setting": "echo 1 > /proc/sys/kernel/sysrq && echo MADE",
        "module": "modprobe dummy && echo MADE",
        "raw socket": "python3 -c \"import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('MADE')\"",
        "ptrace the session": "python3 -c \"import ctypes; print('MADE' if ctypes.CDLL(None).ptrace(16, 3, 0, 0) == 0 else 'no')\"",
    }
    for what, script in attempts.items():
        done = await as_root(env, script + "; id -u")
        assert done.stdout.strip().splitlines()[-1] == "0", done.stdout
        tally.attempt(f"root made a {what}" if "MADE" in done.stdout else None)
    done = await as_root(env, chroot_escape)
    assert "ESCAPE-ROOT" in done.stdout, done.stdout  # the classic escape ran...
    listing = done.stdout.split("ESCAPE-ROOT", 1)[1]
    tally.attempt("the chroot escape reached the host's root" if "'work'" in listing or "'srv'" in listing else None)
    assert not tally.escapes, tally.escapes


async def test_root_reaches_neither_host_processes_nor_the_other_desktop(
    pair: list[LocalEnvironment], tmp_path: Path, tally: Tally
) -> None:
    """Root of a desktop of its own (it ends by killing everything it can) against a host
    process and the other desktop of the pair."""
    second = pair[1]
    victim = LocalDesktop("root-victim", tmp_path, DesktopConfig(snapshot="blank", spare=False), pool="security-root")

    async def keep(_: LocalEnvironment) -> None:
        return None

    host = subprocess.Popen(["sleep", "300"], start_new_session=True)  # noqa: ASYNC220 - a bystander
    mark = f"other-desktop-{secrets.token_hex(3)}"
    try:
        await run_blocking(victim.start)
        first = LocalEnvironment(victim, server_environment(victim), on_close=keep)
        await shell(second.desktop, f"echo secret > ~/Documents/{mark}.txt")
        other = {p.pid for p in second.desktop.processes()}
        seen = await as_root(
            first,
            f"ps -e -o pid= | wc -l; kill -9 {host.pid} {' '.join(map(str, other))} 2>&1; "
            f"find / -xdev -name '{mark}*' 2>/dev/null; ls /proc/*/root/home/user/Documents 2>/dev/null | grep {mark}; "
            "id -u",
        )
        assert seen.stdout.strip().splitlines()[-1] == "0", seen.stdout
        count = int(seen.stdout.split()[0])
        escaped = None
        if mark in seen.stdout.replace(f"'{mark}*'", ""):
            escaped = "the other desktop's file was found"
        elif count > 60:
            escaped = f"root sees {count} processes: more than its desktop's"
        tally.attempt(escaped)
        # Everything root can kill: its own desktop goes (the reply with it), nothing else does.
        with contextlib.suppress(EnvironmentLost):
            await as_root(first, "kill -9 -1", timeout=10)
        escaped = None
        if host.poll() is not None:
            escaped = "a host process died"
        elif second.desktop.problem() is not None or not other <= {p.pid for p in second.desktop.processes()}:
            escaped = "the other desktop lost a process"
        elif mark not in await shell(second.desktop, "ls ~/Documents"):
            escaped = "the other desktop's file is gone"
        tally.attempt(escaped)
    finally:
        host.kill()
        host.wait()
        await run_blocking(victim.close)
    assert not tally.escapes, tally.escapes
