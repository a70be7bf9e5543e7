"""The conformance suite every environment provider must pass (local, osworld, android).

Each check is an async function of an `Environment` and a `ConformanceKit` (the few things
that differ per platform: how to click, type and open an editor, which host paths and secrets
must stay invisible). A check returns nothing or raises `ConformanceFailure` saying what was
wrong. Checks leave state behind on purpose only where noted; run `env.revert()` between them.
None of them sends a packet off the machine: network isolation is shown with a loopback
listener of the caller's and the sandbox's interface list.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from PIL import Image

from core.protocols import Environment, ExecResult, Sandbox

__all__ = [
    "CHECKS",
    "DESKTOP_KIT",
    "ConformanceFailure",
    "ConformanceKit",
    "check_click_lands",
    "check_no_network",
    "check_revert_restores",
    "check_sandbox_hides_host",
    "check_sandbox_hides_secrets",
    "check_sandbox_writes_only_home",
    "check_screenshot_png",
    "check_timeout_kills_children",
    "check_typed_text_round_trips",
    "run_conformance",
]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ConformanceFailure(AssertionError):
    """An environment broke a promise of the `Environment` contract."""


@dataclass(frozen=True)
class ConformanceKit:
    """Platform specifics and the host facts a check compares against.

    ``hidden_paths`` are files that exist on the host (e.g. in a run folder) and must be
    invisible to sandboxed code (an empty folder may cover their parent);
    ``secrets`` are values of the runner's environment variables that must not leak;
    ``loopback_port`` is a port the caller listens on at the host's 127.0.0.1.
    """

    click: Callable[[int, int], str]
    open_editor: Callable[[str], str]
    type_text: Callable[[str], str]
    save_editor: str
    hidden_paths: Sequence[str] = ()
    secrets: Sequence[str] = ()
    loopback_port: int | None = None
    settle: float = 0.3


def _mousepad_open(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return (
        "import os, subprocess\n"
        f"p = os.path.expanduser({path!r})\n"
        "open(p, 'a').close()\n"
        "subprocess.Popen(['mousepad', '--disable-server', p], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"found = subprocess.run(['xdotool', 'search', '--sync', '--onlyvisible', '--name', {name!r}],\n"
        "                       timeout=20, capture_output=True, text=True, check=True)\n"
        "wid = found.stdout.split()[0]\n"
        "subprocess.run(['xdotool', 'windowactivate', '--sync', wid], timeout=10, check=False)\n"
        "geo = subprocess.run(['xdotool', 'getwindowgeometry', '--shell', wid], capture_output=True, text=True).stdout\n"
        "g = dict(line.split('=', 1) for line in geo.split())\n"
        "import pyautogui, time\n"
        "pyautogui.click(int(g['X']) + int(g['WIDTH']) // 2, int(g['Y']) + int(g['HEIGHT']) // 2)\n"
        "for _ in range(100):\n"
        "    active = subprocess.run(['xdotool', 'getwindowfocus'], capture_output=True, text=True).stdout.strip()\n"
        "    if active == wid:\n"
        "        break\n"
        "    time.sleep(0.05)\n"
    )


#: Ubuntu desktops driven with pyautogui (local and OSWorld VMs).
DESKTOP_KIT = ConformanceKit(
    click=lambda x, y: f"import pyautogui\npyautogui.click({x}, {y})",
    open_editor=_mousepad_open,
    type_text=lambda text: (
        f"import pyautogui, time\ntime.sleep(0.3)\npyautogui.write({text!r}, interval=0.01)"
    ),
    save_editor="import pyautogui\npyautogui.hotkey('ctrl', 's')",
)


def _fail(message: str) -> ConformanceFailure:
    return ConformanceFailure(message)


def _need_sandbox(env: Environment) -> Sandbox:
    box = env.sandbox()
    if box is None:
        raise _fail(f"{env.name}: this check needs a sandbox and the environment has none")
    return box


async def _sh(box: Sandbox, script: str, *, timeout: float = 30.0) -> ExecResult:
    return await box.run("bash", script, timeout=timeout)


def _ok(result: ExecResult, what: str) -> ExecResult:
    if not result.ok:
        raise _fail(
            f"{what} failed: status={result.status} rc={result.returncode} stderr={result.stderr[-300:]!r}"
        )
    return result


# -- screen and input --------------------------------------------------------------------


async def check_screenshot_png(env: Environment, kit: ConformanceKit) -> None:
    """The screenshot is a PNG whose size is the declared screen size."""
    data = await env.screenshot()
    if not data.startswith(_PNG_MAGIC):
        raise _fail(f"screenshot is not a PNG (starts with {data[:8]!r})")
    size = await env.screen_size()
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        if image.size != tuple(size):
            raise _fail(f"screenshot is {image.size}, the environment declares {tuple(size)}")


async def check_click_lands(env: Environment, kit: ConformanceKit) -> None:
    """A click at (x, y) leaves the pointer at (x, y), near a corner and in the middle."""
    width, height = await env.screen_size()
    for x, y in ((width - 7, height - 5), (width // 3 + 1, height // 2 + 3), (3, 2)):
        _ok(await env.act(kit.click(x, y)), f"click at {(x, y)}")
        where = tuple(await env.cursor_position())
        if where != (x, y):
            raise _fail(f"clicked at {(x, y)} but the pointer is at {where}")


async def check_typed_text_round_trips(env: Environment, kit: ConformanceKit) -> None:
    """Text typed into an editor and saved is what the file holds afterwards."""
    box = _need_sandbox(env)
    text = f"conformance {secrets.token_hex(4)} typed"
    path = f"~/typed-{secrets.token_hex(3)}.txt"
    _ok(await env.act(kit.open_editor(path)), "opening the editor")
    await asyncio.sleep(kit.settle)
    _ok(await env.act(kit.type_text(text)), "typing")
    _ok(await env.act(kit.save_editor), "saving")
    deadline = time.monotonic() + 10.0
    got = ""
    while time.monotonic() < deadline:
        got = (await _sh(box, f"cat {path} 2>/dev/null || true")).stdout
        if text in got:
            return
        await asyncio.sleep(0.2)
    raise _fail(f"typed {text!r} but the saved file holds {got!r}")


# -- snapshot ----------------------------------------------------------------------------


async def check_revert_restores(env: Environment, kit: ConformanceKit) -> None:
    """Files made, changed or deleted after the snapshot are back to the snapshot after revert."""
    box = _need_sandbox(env)
    before = _ok(
        await _sh(box, "cd ~ && find . -path ./.cache -prune -o -type f -print | sort"), "listing home"
    ).stdout
    _ok(
        await _sh(
            box, "cd ~ && echo changed > reverted-marker.txt && find . -type f -name '*.conf' -delete; true"
        ),
        "changing the home",
    )
    await env.revert()
    after = _ok(
        await _sh(box, "cd ~ && find . -path ./.cache -prune -o -type f -print | sort"), "listing home"
    ).stdout
    if "reverted-marker.txt" in after:
        raise _fail("a file written after the snapshot survived revert")
    if before != after:
        raise _fail("the home after revert differs from the snapshot's file list")


# -- sandbox -----------------------------------------------------------------------------


async def check_timeout_kills_children(env: Environment, kit: ConformanceKit) -> None:
    """A sandbox run that times out is reported as such, promptly, and its children stop."""
    box = _need_sandbox(env)
    beat = f"~/heartbeat-{secrets.token_hex(3)}"
    # Each beat appends a line: rewriting the file would leave it empty whenever the kill lands
    # between the shell's truncation and date's write, and read as "the child never ran".
    script = f"(while true; do date +%s%N >> {beat}; sleep 0.05; done) & sleep 300"
    t0 = time.monotonic()
    result = await _sh(box, script, timeout=1.0)
    took = time.monotonic() - t0
    if result.status != "timeout":
        raise _fail(f"a 300 s command under a 1 s timeout ended with status {result.status!r}")
    if took > 10.0:
        raise _fail(f"the timeout took {took:.1f} s to take effect")
    first = (await _sh(box, f"cat {beat} 2>/dev/null || true")).stdout
    await asyncio.sleep(0.6)
    second = (await _sh(box, f"cat {beat} 2>/dev/null || true")).stdout
    if not first.strip():
        raise _fail("the background child never ran; the check proves nothing")
    if first != second:
        raise _fail("a child of the timed-out command is still running")


async def check_sandbox_writes_only_home(env: Environment, kit: ConformanceKit) -> None:
    """Sandboxed code can write in its home and nowhere on the system; its /tmp is its own
    scratch: never the host's, and gone after a revert (code that runs in a desktop's own
    session shares that desktop's /tmp until then, as on a VM)."""
    box = _need_sandbox(env)
    name = f"written-{secrets.token_hex(3)}"
    _ok(await _sh(box, f"echo ok > ~/{name}"), "writing in the home")
    if (await _sh(box, f"cat ~/{name}")).stdout.strip() != "ok":
        raise _fail("a file written in the home did not persist to the next run")
    for target in ("/etc", "/usr", "/usr/local/bin", "/var", "/opt", "/"):
        res = await _sh(box, f"echo x > {target.rstrip('/')}/{name} 2>/dev/null && echo WROTE || echo DENIED")
        if "WROTE" in res.stdout:
            raise _fail(f"sandboxed code could write into {target}")
    # The code runs where the agent acts (OSWorld's coding agent runs in the VM), so /tmp is the
    # desktop's own: shared with its apps, scratch, gone with the next revert.
    tmp = await _sh(box, f"echo x > /tmp/{name} 2>/dev/null; true")
    _ok(tmp, "writing /tmp")
    if await asyncio.to_thread(os.path.exists, f"/tmp/{name}"):
        raise _fail("sandboxed code wrote into the host's /tmp")
    await env.revert()
    again = await _sh(_need_sandbox(env), f"test -e /tmp/{name} && echo SEEN || echo GONE")
    if "SEEN" in again.stdout:
        raise _fail("/tmp inside the sandbox outlives a revert; it must be private and scratch")


async def check_sandbox_hides_host(env: Environment, kit: ConformanceKit) -> None:
    """Host home folders and the caller's hidden paths (run folders) are invisible."""
    box = _need_sandbox(env)
    # The sandbox's own home may sit in /home (a desktop's /home/user); nothing else may.
    res = await _sh(box, "ls -A /root /home 2>/dev/null | grep -v ':$' | grep -v '^$' | grep -vxF \"${HOME##*/}\" || true")
    if res.stdout.strip():
        raise _fail(f"host home folders are visible in the sandbox: {res.stdout.strip()[:200]!r}")
    for path in kit.hidden_paths:
        res = await _sh(box, f"test -e {_quote(path)} && echo SEEN || echo HIDDEN")
        if "HIDDEN" not in res.stdout:
            raise _fail(f"the host file {path} is visible inside the sandbox")


async def check_sandbox_hides_secrets(env: Environment, kit: ConformanceKit) -> None:
    """The runner's secrets (e.g. API keys) appear in no environment variable the code can read."""
    box = _need_sandbox(env)
    shell = await _sh(box, "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    py = await box.run("python", "import os\nfor k, v in os.environ.items():\n    print(k, v)", timeout=30)
    act = await env.act("import os\nprint('\\n'.join(f'{k}={v}' for k, v in os.environ.items()))")
    names = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY")
    for label, result in (("shell", shell), ("python", py), ("action", act)):
        blob = result.stdout + result.stderr
        for secret in kit.secrets:
            if secret and secret in blob:
                raise _fail(f"a runner secret is visible to {label} code")
        leaked = [n for n in names if f"{n}=" in blob or f"{n} " in blob]
        if leaked:
            raise _fail(f"{label} code sees {', '.join(leaked)}")


async def check_no_network(env: Environment, kit: ConformanceKit) -> None:
    """Sandboxed code has no interface but loopback and cannot reach the host's loopback."""
    box = _need_sandbox(env)
    code = (
        "import socket\n"
        "names = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])\n"
        "print('IFACES', ','.join(names))\n"
        "routes = open('/proc/net/route').read().splitlines()[1:]\n"
        "print('ROUTES', len(routes))\n"
    )
    if kit.loopback_port is not None:
        code += (
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {kit.loopback_port}), timeout=2).close()\n"
            "    print('REACHED')\n"
            "except OSError as e:\n"
            "    print('BLOCKED', type(e).__name__)\n"
        )
    out = _ok(await box.run("python", code, timeout=30), "probing the network").stdout
    ifaces = next((line for line in out.splitlines() if line.startswith("IFACES ")), "")
    if ifaces != "IFACES lo":
        raise _fail(f"the sandbox has network interfaces besides loopback: {ifaces!r}")
    if "ROUTES 0" not in out:
        raise _fail("the sandbox has a routing table entry, so it could reach a network")
    if "REACHED" in out:
        raise _fail("sandboxed code reached a server on the host's loopback")


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


Check = Callable[[Environment, ConformanceKit], Awaitable[None]]

#: Every check by name, in a sensible order (cheap ones first).
CHECKS: dict[str, Check] = {
    "screenshot_png": check_screenshot_png,
    "click_lands": check_click_lands,
    "sandbox_writes_only_home": check_sandbox_writes_only_home,
    "sandbox_hides_host": check_sandbox_hides_host,
    "sandbox_hides_secrets": check_sandbox_hides_secrets,
    "no_network": check_no_network,
    "timeout_kills_children": check_timeout_kills_children,
    "typed_text_round_trips": check_typed_text_round_trips,
    "revert_restores": check_revert_restores,
}


async def run_conformance(
    env: Environment, kit: ConformanceKit, *, names: Sequence[str] | None = None, revert_between: bool = True
) -> dict[str, str | None]:
    """Run the named checks (all by default); maps each name to None (passed) or the failure."""
    results: dict[str, str | None] = {}
    for name in names or list(CHECKS):
        try:
            await CHECKS[name](env, kit)
            results[name] = None
        except ConformanceFailure as exc:
            results[name] = str(exc)
        if revert_between:
            await env.revert()
    return results
