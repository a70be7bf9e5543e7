"""Helpers of the security suite: run hostile code in a desktop, look at the host."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from core.protocols import ExecResult
from environments.local import LocalDesktop, LocalEnvironment, desktop_client
from environments.osworld import OSWorldClient, ServerError

FIGURES_ENV = "SECURITY_FIGURES"
SCALE_ENV = "SECURITY_SCALE"


def scale() -> int:
    """How many times each attack is tried (CI: 1; the benchmark raises it)."""
    return max(1, int(os.environ.get(SCALE_ENV, "1")))


@dataclass
class Canary:
    """Root-only host files: a secret that must not leave, a target that must not change."""

    folder: Path
    secret: Path
    target: Path
    secret_text: str
    prints: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)

    def fingerprint(self) -> dict[str, tuple[str, int, int, int]]:
        found = {}
        for path in (self.folder, self.secret, self.target):
            st = os.lstat(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else "dir"
            found[str(path)] = (digest, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
        found["listing"] = (",".join(sorted(os.listdir(self.folder))), 0, 0, 0)
        return found

    def changed(self) -> bool:
        return self.fingerprint() != self.prints


@dataclass
class Tally:
    """Attempts and escapes of one attack."""

    attack: str
    attempts: int = 0
    escapes: list[str] = field(default_factory=list)
    #: The test recorded its attacks one by one (`record`); the fixture adds no total line.
    split: bool = False

    def attempt(self, escaped: str | None) -> None:
        self.attempts += 1
        if escaped:
            self.escapes.append(escaped)


def record(tally: Tally) -> str:
    """``attack: attempts N escapes M``, printed and appended to $SECURITY_FIGURES (for
    benchmarks/security.py); returns the line."""
    line = f"{tally.attack}: attempts {tally.attempts} escapes {len(tally.escapes)}\n"
    print("\n" + line, end="")
    sink = os.environ.get(FIGURES_ENV)
    if sink:
        with open(sink, "a", encoding="utf-8") as out:
            out.write(line)
    return line


async def act(env: LocalEnvironment, code: str) -> ExecResult:
    """Hostile GUI-agent action code, run by the desktop's action executor."""
    return await env.act(code)


async def shell(desktop: LocalDesktop, script: str, timeout: float = 30.0) -> str:
    """A shell command as the desktop (what the GUI agent gets by typing into xterm)."""
    async with desktop_client(desktop.info()) as client:
        done = await client.execute(["bash", "-c", script], timeout=timeout)
    return done.stdout + done.stderr


async def spawn_daemon(env: LocalEnvironment, script: str) -> None:
    """A detached background loop started by action code: new session, empty environment."""
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['setsid', 'env', '-i', 'PATH=/usr/bin:/bin', 'HOME=/home/user', 'sh', '-c', {json.dumps(script)}],"
        " start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    done = await env.act(code)
    assert done.ok, done


async def wait_window(desktop: LocalDesktop, title: str, timeout: float = 30.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if title in await shell(desktop, "wmctrl -l"):
            return True
        await asyncio.sleep(0.1)
    return False


async def fetch(client: OSWorldClient, path: str) -> bytes | None:
    """What the evaluator gets for a result file: its bytes, or None when refused or missing."""
    try:
        return await client.file(path)
    except ServerError:
        return None


async def wait_process(desktop: LocalDesktop, comm: str, timeout: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if any(p.comm == comm for p in desktop.processes()):
            return True
        await asyncio.sleep(0.05)
    return False


def host_file_exists(path: str) -> bool:
    return Path(path).exists()
