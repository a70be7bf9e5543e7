"""OSWorld's own request forms on a real local desktop, beside OSWorld's server doing the same.

Inside one local desktop (the mousepad snapshot), the reference server (`osworld_reference.py`,
what OSWorld's in-VM server does per request) runs with the desktop's own `python`, beside the
desktop's controller server. Both are asked, in the same run:

- ``/execute`` in OSWorld's controller form, ``["python", "-c", "import pyautogui; import time;
  pyautogui.FAILSAFE = False; pyautogui.moveTo(x, y)"]`` (a fresh interpreter per action);
- ``/execute`` of ``true`` (the server's own cost);
- ``/terminal`` with no terminal window active (what OSWorld's SetupController polls before
  every setup).

A third column runs the same ``python -c`` with the project's own libraries on the path, as
desktops did before they had a Python of their own (pyautogui then imported OpenCV).
Goal: every ratio to the reference at most 1.0 (the machine is shared: compare ratios).

    python benchmarks/desktop_osworld.py [-n 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from environments.doors.forward import TcpForwarder
from environments.local import DesktopConfig, LocalDesktop, desktop_client
from environments.osworld import PYAUTOGUI_PREFIX
from environments.walls.system import OPT

REFERENCE = Path(__file__).with_name("osworld_reference.py")
GOAL = 1.0


async def _medians_ms(calls: list[Callable[[], Awaitable[object]]], n: int) -> list[float]:
    """Median ms of each call, measured in turns (A, B, A, B ...) so a shared machine's load
    falls on all of them alike."""
    for call in calls:
        await call()  # warm
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(n):
        for call, spent in zip(calls, times, strict=True):
            started = time.perf_counter()
            await call()
            spent.append(time.perf_counter() - started)
    return [statistics.median(spent) * 1000 for spent in times]


async def run(n: int) -> list[tuple[str, float, float, float | None]]:
    with tempfile.TemporaryDirectory(prefix="desktop-osworld-") as base:
        desktop = LocalDesktop("bench", Path(base), DesktopConfig(snapshot="mousepad", spare=False), pool="bench")
        await asyncio.to_thread(desktop.start)
        try:
            return await _measure(desktop, n)
        finally:
            await asyncio.to_thread(desktop.close)


async def _measure(desktop: LocalDesktop, n: int) -> list[tuple[str, float, float, float | None]]:
    info = desktop.info()
    async with desktop_client(info, timeout=120) as client:
        await client.upload("/tmp/osworld_reference.py", REFERENCE.read_bytes())
        await client.launch(["python", "/tmp/osworld_reference.py", "/tmp/reference.port"])
        port = None
        for _ in range(200):
            data = await client.file("/tmp/reference.port")
            if data:
                port = int(data)
                break
            await asyncio.sleep(0.05)
        if port is None:
            raise SystemExit("the reference server did not start inside the desktop")
        door = TcpForwarder(("127.0.0.1", port), netns=lambda: f"/proc/{desktop.info().pid}/ns/net")
        spots = iter(range(10**9))

        def python_c(python: str = "python") -> list[str]:
            k = next(spots)
            return [python, "-c", PYAUTOGUI_PREFIX + f"pyautogui.moveTo({100 + (k % 7) * 150}, {100 + (k % 5) * 100})"]

        ours = httpx.AsyncClient(
            base_url="http://desktop", headers={"Authorization": f"Bearer {info.token()}"},
            transport=httpx.AsyncHTTPTransport(uds=info.socket), timeout=60,
        )  # fmt: skip
        async with httpx.AsyncClient(base_url=door.url, timeout=120) as reference, ours:

            async def ours_action() -> None:
                done = await client.execute(python_c())
                assert done.returncode == 0, done

            async def old_action() -> None:
                env_path = f"{OPT}/src:{OPT}/lib1"
                done = await client.execute(["env", f"PYTHONPATH={env_path}", *python_c("python3")])
                assert done.returncode == 0, done

            async def reference_action() -> None:
                reply = await reference.post("/execute", json={"command": python_c(), "shell": False})
                assert reply.json()["returncode"] == 0, reply.text

            async def ours_true() -> None:
                await client.execute(["true"])

            async def reference_true() -> None:
                await reference.post("/execute", json={"command": ["true"], "shell": False})

            async def ours_terminal() -> None:
                reply = await ours.get("/terminal")
                assert reply.json()["output"] is None, reply.text

            async def reference_terminal() -> None:
                reply = await reference.get("/terminal")
                assert reply.json()["output"] is None, reply.text

            action, action_ref, action_old = await _medians_ms([ours_action, reference_action, old_action], n)
            noop, noop_ref = await _medians_ms([ours_true, reference_true], n)
            term, term_ref = await _medians_ms([ours_terminal, reference_terminal], n)
            rows: list[tuple[str, float, float, float | None]] = [
                ("/execute python -c pyautogui (OSWorld's form)", action, action_ref, action_old),
                ("/execute true", noop, noop_ref, None),
                ("/terminal, no terminal active", term, term_ref, None),
            ]
        door.close()
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20)
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.n))
    print(f"{'operation':<48} {'ours ms':>9} {'OSWorld ms':>11} {'ratio':>7} {'before ms':>10}")
    worst = 0.0
    for name, ours, reference, before in rows:
        ratio = ours / reference
        worst = max(worst, ratio)
        old = f"{before:10.1f}" if before is not None else f"{'-':>10}"
        print(f"{name:<48} {ours:9.1f} {reference:11.1f} {ratio:7.2f} {old}")
    print(f"worst ratio to OSWorld's server {worst:.2f} (goal <= {GOAL:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
