"""Helpers shared by the runner's tests: whether desktops can run here, starting one, the
live processes (to find what a test left behind), and fake model servers on a thread of
their own (for commands that run their own event loop or a subprocess)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.llm import Reply, ScriptRequest
from environments.local import DesktopConfig, LocalDesktop
from environments.local.spawner import run_all
from testing.llm import OpenAIServer

_NEEDS = ("Xvfb", "openbox", "mousepad", "xterm", "dbus-daemon", "bwrap", "xdotool", "setpriv")


def desktops_missing() -> str | None:
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (install the desktop Debian packages)"
    if os.geteuid() != 0:
        return "local desktops run apps as an unprivileged uid and need root to start"
    return None


def start_desktop(base: Path, name: str, pool: str, *, tcp_forward: bool = False) -> LocalDesktop:
    desktop = LocalDesktop(name, base, DesktopConfig(tcp_forward=tcp_forward), pool=pool)
    run_all([desktop.start])
    return desktop


def live_commands() -> dict[int, str]:
    """Every live process's command line (zombies and vanished ones left out)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if cmd:
                out[int(entry.name)] = cmd
    return out


def sandboxes_under(base: Path) -> list[int]:
    """Live desktop sandboxes (bubblewrap) whose desktop folder is under `base`.

    A desktop's bubblewrap names no host path on its command line (it binds what its
    launcher staged), but its output goes to the desktop's log, a file under the desktop's
    folder, which its descriptor still names as the host sees it."""
    found = []
    for pid, cmd in live_commands().items():
        if cmd.split(" ")[0] != "bwrap":
            continue
        for fd in (1, 2):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(f"{base}/"):
                found.append(pid)
                break
    return found


@contextmanager
def threaded_servers(*servers: OpenAIServer) -> Iterator[list[str]]:
    """Run the servers on one loop thread; yield their base URLs; stop them afterwards."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started: list[OpenAIServer] = []
    try:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(10)
            started.append(server)
        yield [server.base_url for server in servers]
    finally:
        for server in started:
            asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


#: The policy model per protocol: the strict Anthropic server, like the real one, serves only
#: Claude names; the OpenAI one serves any name outside its own families' schemes.
HARNESS_MODELS = {"openai": "openai/test-model", "anthropic": "anthropic/claude-haiku-4-5"}


def solver_or_quitter(task: str, *, quitter: bool, quit_delay: float) -> Any:
    """Scripted replies for a two-rollout bench: the solver follows the demo plan of ``task``
    (0.6 s a step, slow enough to be killed mid-run), the quitter gives up after
    ``quit_delay``; the narrator and judge are the demo's."""
    from runner.demo_judge import demo_judge_reply
    from runner.demo_policy import DEMO_PLANS, action_reply, role_of

    def reply(request: ScriptRequest) -> str | Reply:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        text = "\n".join(m.text() for m in request.messages)
        if system.startswith("You describe what a single computer action") or "===== Candidate" in text:
            return demo_judge_reply(request)
        if role_of(request.messages) in ("grounding", "reflection", "code_agent", "code_summary"):
            return DEMO_PLANS[task](request)
        if quitter:
            return Reply(text=action_reply("The list is not there.", "agent.fail()"), delay=quit_delay)
        return Reply(text=str(DEMO_PLANS[task](request)), delay=0.6)

    return reply


@contextmanager
def module_elsewhere(folder: Path, name: str, source: str, *registered: tuple[Any, str]) -> Iterator[Path]:
    """A module of the user's own, `name`.py in `folder` outside the tree, importable while
    the block runs; afterwards it is forgotten and each (registry, entry name) it registered
    under a dotted path is unregistered."""
    import importlib
    import sys
    import textwrap

    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)
        for registry, entry in registered:
            registry.unregister(entry)


def flatten(text: str) -> str:
    """A rich table's text with its borders and line breaks flattened to single spaces."""
    return " ".join(text.replace("│", " ").split())
