"""Step latency of a desktop: screenshot and action through the controller server.

Prints, for each operation (in ms unless its name gives a unit), the median through the
server, the same operation done in this process (the floor an HTTP server can approach),
and a reference server started beside ours on the same desktop in the same run, as
ratios. The reference is OSWorld's own server when given (``--reference
.../desktop_env/server/main.py --reference-python PY``, run unchanged; `osworld_server.py`
says how and names the copy), else an imitation of it on this project's Python
(`osworld_reference.py`), and the first line printed says which. Goal: screenshot at most
0.5 of the reference, with the PNG still accepted by OSWorld's own client (desktop-env's
`PythonController`). The machine is shared: compare ratios.

Then whole local desktops from the provider (Xvfb, openbox, D-Bus, mousepad, server and
executor): start time, revert time against the 2 s goal, memory per desktop, and how many fit
(`--desktops`, default 8, the goal for this 2-core machine). Desktops keep their default
spare sandbox; `benchmarks/revert.py` compares revert with and without it.

    python benchmarks/env_step.py [-n 40] [--size 1920x1080] [--desktops 8] \
        [--reference OSWorld/desktop_env/server/main.py --reference-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from environments.local import measure_desktops
from environments.osworld import PYAUTOGUI_PREFIX, OSWorldClient
from environments.server.capture import ScreenCapture

sys.path.insert(0, str(Path(__file__).parent))
from osworld_server import describe as describe_server
from osworld_server import launch as launch_server

SCREENSHOT_GOAL = 0.5
REFERENCE = Path(__file__).with_name("osworld_reference.py")


@dataclass(frozen=True)
class Row:
    """One measured operation: ours, the in-process floor, and the OSWorld-style reference."""

    name: str
    server_ms: float
    in_process_ms: float | None = None
    osworld_ms: float | None = None
    note: str = ""


@dataclass
class BenchDesktop:
    """A display with an editor showing text and a controller server on it."""

    display: str
    width: int
    height: int
    client: OSWorldClient
    server_pid: int
    reference: httpx.AsyncClient


async def _median_ms(operation: Callable[[], Awaitable[object]], n: int) -> float:
    await operation()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await operation()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def osworld_accepts(png: bytes) -> str:
    """Whether OSWorld's own client takes these bytes as a screenshot (its check, not ours)."""
    try:
        from desktop_env.controllers.python import PythonController
    except ImportError:
        return "not checked: desktop-env is not installed (scripts/setup.sh installs it)"
    return "yes" if PythonController._is_valid_image_response("image/png", png) else "NO"


async def measure_step(desktop: BenchDesktop, n: int) -> tuple[list[Row], str]:
    """Screenshot and action latency: server vs in-process vs the OSWorld-style reference."""
    client, reference = desktop.client, desktop.reference
    capture = ScreenCapture()

    async def reference_shot() -> bytes:
        reply = await reference.get("/screenshot")
        reply.raise_for_status()
        return reply.content

    try:
        shot_server = await _median_ms(client.screenshot, n)
        shot_local = await _median_ms(capture.png, n)
        shot_reference = await _median_ms(reference_shot, n)
    finally:
        await capture.close()
    accepted = osworld_accepts(await client.screenshot())

    import pyautogui  # binds to DISPLAY at import, which main() has set

    pyautogui.PAUSE = 0
    spots = iter(range(10**9))

    def target() -> tuple[int, int]:
        k = next(spots)
        return 100 + (k % 7) * 150, 100 + (k % 5) * 100

    async def server_action() -> None:
        x, y = target()
        result = await client.action(f"pyautogui.moveTo({x}, {y})")
        assert result.ok, result

    async def local_action() -> None:
        pyautogui.moveTo(*target())

    def python_c(x: int, y: int) -> list[str]:
        # OSWorld's controller wraps each action this way; the pause stays at pyautogui's default.
        return [sys.executable, "-c", PYAUTOGUI_PREFIX + f"pyautogui.moveTo({x}, {y})"]

    async def osworld_style_action() -> None:
        result = await client.execute(python_c(*target()))
        assert result.ok, result

    async def reference_action() -> None:
        reply = await reference.post("/execute", json={"command": python_c(*target()), "shell": False})
        reply.raise_for_status()
        assert reply.json()["returncode"] == 0, reply.text

    cold_n = max(5, n // 4)
    action_server = await _median_ms(server_action, n)
    action_local = await _median_ms(local_action, n)
    action_cold = await _median_ms(osworld_style_action, cold_n)
    action_reference = await _median_ms(reference_action, cold_n)
    size = f"{desktop.width}x{desktop.height}"
    rows = [
        Row(f"screenshot {size} (PNG level 1)", shot_server, shot_local, shot_reference),
        Row("action moveTo via /action (warm)", action_server, action_local, action_reference),
        Row(
            "action via /execute python -c",
            action_cold,
            action_local,
            action_reference,
            "OSWorld's way on our server",
        ),
    ]
    return rows, accepted


def _pss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def measure_server_memory(desktop: BenchDesktop) -> list[Row]:
    """PSS of the controller server and its warm executor (part of a desktop's footprint)."""
    server = _pss_mb(desktop.server_pid)
    children = sum(_pss_mb(pid) for pid in _children(desktop.server_pid))
    return [
        Row(
            "memory: server + executor (PSS MB)",
            server + children,
            note=f"server {server:.1f}, executor {children:.1f}",
        )
    ]


def print_rows(rows: list[Row]) -> None:
    header = f"{'operation':36} {'server':>10} {'in-proc':>11} {'ratio':>7} {'reference':>11} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for row in rows:
        local = f"{row.in_process_ms:11.1f}" if row.in_process_ms is not None else f"{'-':>11}"
        local_ratio = f"{row.server_ms / row.in_process_ms:7.2f}" if row.in_process_ms else f"{'-':>7}"
        ref = f"{row.osworld_ms:11.1f}" if row.osworld_ms is not None else f"{'-':>11}"
        ref_ratio = f"{row.server_ms / row.osworld_ms:7.3f}" if row.osworld_ms else f"{'-':>7}"
        print(f"{row.name:36} {row.server_ms:10.1f} {local} {local_ratio} {ref} {ref_ratio}  {row.note}")


def _wait_for_port(proc: subprocess.Popen[bytes], port_file: Path, what: str) -> str:
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the {what} did not start; run it by hand to see why")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port_file.read_text().strip()}"


@dataclass(frozen=True)
class Reference:
    """OSWorld's own server file and the Python to run it with; None runs the imitation."""

    main: Path | None = None
    python: str = sys.executable

    def describe(self) -> str:
        if self.main is None:
            return ("reference: an IMITATION of OSWorld's server on this project's Python "
                    "(benchmarks/osworld_reference.py); pass --reference .../desktop_env/server/main.py "
                    "for OSWorld's own")
        return describe_server(self.main, self.python)

    def start(self, env: dict[str, str], port_file: Path) -> subprocess.Popen[bytes]:
        if self.main is None:
            return subprocess.Popen([sys.executable, str(REFERENCE), str(port_file)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        return launch_server(self.main, self.python, port_file, env)


@contextmanager
def bench_desktop(width: int, height: int, folder: Path,
                  reference_server: Reference | None = None) -> Iterator[tuple[str, str, str, int, str]]:
    """Xvfb + an editor showing text + our server + the OSWorld-style reference server;
    yields (display, url, token, server pid, reference url)."""
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"],
        pass_fds=[write_fd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        display = ":" + pipe.readline().strip().decode()
    xauthority = folder / "Xauthority"  # a cookie file, as desktops have (Xvfb accepts any)
    subprocess.run(["xauth", "-q", "-f", str(xauthority), "add", display, ".", secrets.token_hex(16)], check=True)
    env = {**os.environ, "DISPLAY": display, "XAUTHORITY": str(xauthority), "HOME": str(folder)}
    text = folder / "notes.txt"
    text.write_text("\n".join(f"{i:03d} The quick brown fox jumps over the lazy dog." for i in range(60)))
    editor = subprocess.Popen(
        ["mousepad", "--disable-server", str(text)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    token = secrets.token_urlsafe(24)
    (folder / "token").write_text(token)
    port_file = folder / "port"
    server = subprocess.Popen(
        [sys.executable, "-m", "environments.server", "--port", "0", "--port-file", str(port_file),
         "--token-file", str(folder / "token")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    reference_port = folder / "reference-port"
    reference = (reference_server or Reference()).start(env, reference_port)
    try:
        url = _wait_for_port(server, port_file, "controller server")
        reference_url = _wait_for_port(reference, reference_port, "reference server")
        time.sleep(1.5)  # let the editor draw its window
        yield display, url, token, server.pid, reference_url
    finally:
        for proc in (reference, server, editor, xvfb):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


async def run(width: int, height: int, n: int, reference_server: Reference) -> tuple[list[Row], str]:
    with tempfile.TemporaryDirectory(prefix="env-step-") as folder:
        with bench_desktop(width, height, Path(folder), reference_server) as (display, url, token, pid, reference_url):
            os.environ["DISPLAY"] = display
            os.environ["XAUTHORITY"] = str(Path(folder) / "Xauthority")
            async with (
                OSWorldClient(url, token) as client,
                httpx.AsyncClient(base_url=reference_url, timeout=120) as reference,
            ):
                desktop = BenchDesktop(display, width, height, client, pid, reference)
                rows, accepted = await measure_step(desktop, n)
                return rows + measure_server_memory(desktop), accepted


REVERT_GOAL_S = 2.0


def print_desktops(count: int) -> None:
    """Whole desktops: start, revert and memory, with `count` of them running at once."""
    figures = asyncio.run(measure_desktops(count, reverts=5))
    print()
    print(f"desktops running at once: {figures.desktops} (snapshot {figures.snapshot})")
    print(f"desktop start, one (s): {figures.start_s:.2f}")
    print(f"desktop start, {figures.desktops} in parallel (s): {figures.parallel_start_s:.2f}")
    print(
        f"revert median (s): {figures.revert_s:.3f}  ratio to the {REVERT_GOAL_S:.0f} s goal: "
        f"{figures.revert_s / REVERT_GOAL_S:.3f}"
    )
    print(f"revert worst (s): {figures.revert_max_s:.3f}")
    print(f"memory per desktop (PSS MiB): {figures.pss_mib:.0f}")
    print(f"memory, all {figures.desktops} desktops (PSS MiB): {figures.pss_total_mib:.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=40, help="samples per operation (median)")
    parser.add_argument("--size", default="1920x1080", help="screen size WxH")
    parser.add_argument("--desktops", type=int, default=8, help="whole desktops to run at once (0 skips)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="OSWorld's desktop_env/server/main.py (its folder holds pyxcursor.py): the reference")
    parser.add_argument("--reference-python", default=sys.executable,
                        help="a Python with OSWorld's server requirements (see benchmarks/osworld_server.py)")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    reference_server = Reference(args.reference, args.reference_python)
    print(reference_server.describe(), flush=True)
    rows, accepted = asyncio.run(run(width, height, args.n, reference_server))
    print_rows(rows)
    shot = rows[0]
    assert shot.osworld_ms is not None
    ratio = shot.server_ms / shot.osworld_ms
    verdict = "met" if ratio <= SCREENSHOT_GOAL else "NOT met"
    print(
        f"screenshot ratio to the reference: {ratio:.3f} (goal <= {SCREENSHOT_GOAL}: {verdict}); "
        f"PNG accepted by OSWorld's client: {accepted}"
    )
    if args.desktops > 0:
        print_desktops(args.desktops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
