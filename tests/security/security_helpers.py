"""Helpers of the security suite: run hostile code in a desktop, look at the host."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core.llm import Script
from core.llm.scripted import Step
from core.protocols import ExecResult
from environments.local import LocalDesktop, LocalEnvironment, desktop_client
from environments.osworld import OSWorldClient, ServerError
from testing.llm import OpenAIServer

FIGURES_ENV = "SECURITY_FIGURES"
SCALE_ENV = "SECURITY_SCALE"
#: The console script the CLI chains run, and the stand-in key the scripted server wants.
CLI = Path(sys.executable).with_name("agent-s3")
CLI_KEY = "sk-security-cli-" + "k" * 16
_CLI_NEEDS = ("Xvfb", "openbox", "xterm", "dbus-daemon", "bwrap", "setpriv")


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


def cli_unavailable() -> str | None:
    """Why the CLI chains cannot run here (a missing tool, not root), or None."""
    missing = [tool for tool in _CLI_NEEDS if shutil.which(tool) is None]
    if missing or not CLI.exists():
        return f"missing {', '.join(missing) or 'the agent-s3 console script'}"
    if os.geteuid() != 0:
        return "local desktops need root to start their sandboxes"
    return None


def cli_env(envs: Path) -> dict[str, str]:
    """The CLI's environment: desktops under `envs`, the scripted server's key, no real keys."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(envs), OPENAI_API_KEY=CLI_KEY, COLUMNS="200")
    return env


async def drive_cli(
    commands: list[list[str]], env: dict[str, str], step: Step, timeout: float = 170
) -> list[tuple[int, str]]:
    """Run the commands one after another against one scripted model server (``{base_url}``
    in an argument is its address); each command's exit code and output."""
    done = []
    async with OpenAIServer(Script("security-cli", [step] * 400), api_key=CLI_KEY) as server:
        for argv in commands:
            argv = [server.base_url if a == "{base_url}" else a for a in argv]
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout)
            done.append(
                (proc.returncode if proc.returncode is not None else -1, out.decode(errors="replace"))
            )
    return done


def processes_mentioning(text: str) -> list[str]:
    """Host processes whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = (
                    Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if text in cmd:
                found.append(f"{entry}: {cmd[:100]}")
    return found


def tree_bytes(folder: Path) -> bytes:
    """Every regular file's bytes below `folder` (symlinks not followed)."""
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
