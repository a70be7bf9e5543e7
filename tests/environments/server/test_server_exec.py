"""Running things through the server: honest return codes, scripts, files, timeouts, cleanup."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.protocols import EnvironmentLost
from environments.osworld import OSWorldClient, OSWorldDesktop, ReplyLost

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def _eventually(predicate: Callable[[], bool], within: float = 3.0) -> bool:
    for _ in range(int(within / 0.05)):
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


async def _gone(find: Callable[[str], list[int]], marker: str, within: float = 3.0) -> bool:
    return await _eventually(lambda: not find(marker), within)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


async def test_execute_keeps_osworld_shape_and_reports_exit_codes(server: Any) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers) as http:
        failing = await http.post(
            "/execute", json={"command": ["sh", "-c", "echo out; echo err >&2; exit 3"]}
        )
        split = await http.post("/execute", json={"command": "printf '%s|' 'a b' c"})
        shell = await http.post("/setup/execute", json={"command": "echo $((6*7))", "shell": True})
        missing = await http.post("/execute", json={"command": ["no-such-program-xyz"]})
    assert failing.status_code == 200
    assert failing.json() == {
        "status": "success",
        "output": "out\n",
        "error": "err\n",
        "returncode": 3,
        "exited_ok": False,
    }
    assert split.json()["output"] == "a b|c|"
    assert shell.json()["output"] == "42\n" and shell.json()["returncode"] == 0
    assert missing.status_code == 500 and missing.json()["status"] == "error"
    async with server.client() as client:
        result = await client.execute(["sh", "-c", "exit 5"])
    assert result.status == "error" and result.returncode == 5


async def test_run_bash_script_answers_after_running(server: Any, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers) as http:
        reply = await http.post(
            "/run_bash_script",
            json={"script": "pwd; echo oops >&2; exit 2", "timeout": 10, "working_dir": str(tmp_path)},
        )
        bad_dir = await http.post(
            "/run_bash_script", json={"script": "true", "working_dir": str(tmp_path / "no")}
        )
    assert reply.status_code == 200
    assert reply.json() == {
        "status": "error",
        "output": f"{tmp_path}\noops\n",
        "error": "",
        "returncode": 2,
        "timed_out": False,
    }
    assert bad_dir.status_code == 400
    async with server.client() as client:
        ok = await client.run_bash_script("echo fine", timeout=10)
    assert ok.ok and ok.stdout == "fine\n"


async def test_run_python_shapes(server: Any) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers) as http:
        osworld = await http.post("/run_python", json={"code": "import sys; print('hi'); sys.exit(3)"})
        coact = await http.post("/run_python_script", json={"code": "print(1 + 1)"})
        empty = await http.post("/run_python", json={})
    assert osworld.json()["return_code"] == 3 and osworld.json()["output"] == "hi\n"
    assert osworld.json()["status"] == "error" and osworld.json()["need_more"] is False
    assert coact.json()["returncode"] == 0 and coact.json()["output"] == "2\n" and "duration" in coact.json()
    assert empty.status_code == 400
    async with server.client() as client:
        slow = await client.run_python("import time; time.sleep(10)", timeout=0.5)
    assert slow.status == "timeout"


async def test_upload_and_file_round_trip(server: Any, tmp_path: Path) -> None:
    payload = os.urandom(300_000)
    target = tmp_path / "deep" / "er" / "blob.bin"
    async with server.client() as client:
        await client.upload(str(target), payload)
        assert await client.file(str(target)) == payload
        assert await client.file(str(tmp_path / "absent")) is None
        tree = await client.list_directory(str(tmp_path))
    assert tree["children"][0]["name"] == "deep"
    assert tree["children"][0]["children"][0]["children"] == [{"type": "file", "name": "blob.bin"}]


async def test_timeouts_kill_the_whole_process_group(
    server: Any, find_processes: Callable[[str], list[int]]
) -> None:
    async with server.client() as client:
        started = time.monotonic()
        bash = await client.run_bash_script("sleep 300.111 & sleep 300.112; echo never", timeout=1)
        execute = await client.execute("sleep 300.113 & sleep 300.114", shell=True, timeout=1)
        elapsed = time.monotonic() - started
    assert bash.status == "timeout" and bash.returncode == -1 and "never" not in bash.stdout
    assert execute.status == "timeout"
    assert elapsed < 8
    for marker in ("sleep 300.111", "sleep 300.112", "sleep 300.113", "sleep 300.114"):
        assert await _gone(find_processes, marker), marker


async def test_server_exit_kills_launched_apps(
    server_factory: Callable[..., Any], find_processes: Callable[[str], list[int]]
) -> None:
    own = server_factory()
    async with own.client() as client:
        await client.launch(["sleep", "300.221"])
        await client.launch("sleep 300.222 &", shell=True)
        assert await client.run_bash_script("true", timeout=5)
    assert await _eventually(
        lambda: bool(find_processes("sleep 300.221") and find_processes("sleep 300.222"))
    )
    executor = [pid for pid in find_processes("executor_child.py") if _parent(pid) == own.proc.pid]
    assert len(executor) == 1
    own.proc.send_signal(signal.SIGTERM)
    await asyncio.to_thread(own.proc.wait, 10)
    assert await _gone(find_processes, "sleep 300.22")
    assert await _eventually(lambda: not _alive(executor[0]))


async def test_a_lost_execute_reply_is_never_repeated(proxy: Any, server: Any, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    proxy.drop_replies = 1
    async with OSWorldClient(proxy.url, server.token, retries=3, backoff=0.0) as client:
        with pytest.raises(ReplyLost):
            await client.execute(["sh", "-c", f"echo run >> {counter}"])
        assert proxy.forwarded == ["/execute"]
        with pytest.raises(ReplyLost):
            proxy.drop_replies = 1
            await client.action("pyautogui.moveTo(5, 5)")
        assert proxy.forwarded == ["/execute", "/action"]
    assert counter.read_text() == "run\n"


async def test_reads_are_retried_after_a_lost_reply(proxy: Any, server: Any) -> None:
    proxy.drop_replies = 2
    async with OSWorldClient(proxy.url, server.token, retries=3, backoff=0.0) as client:
        png = await client.screenshot()
    assert png.startswith(b"\x89PNG")
    assert proxy.forwarded == ["/screenshot"] * 3


async def test_unreachable_server_raises_environment_lost() -> None:
    with socket.socket() as bound_not_listening:
        bound_not_listening.bind(("127.0.0.1", 0))
        port = bound_not_listening.getsockname()[1]
        async with OSWorldClient(f"http://127.0.0.1:{port}", "t", retries=2, backoff=0.0) as client:
            with pytest.raises(EnvironmentLost):
                await client.screenshot()
            with pytest.raises(EnvironmentLost):
                await client.execute(["true"])


async def test_desktop_falls_back_to_execute_without_the_warm_executor(proxy: Any, server: Any) -> None:
    proxy.hidden.add("/action")
    desktop = OSWorldDesktop(OSWorldClient(proxy.url, server.token), name="t", python=sys.executable)
    warm = OSWorldDesktop(server.client(), name="w")
    try:
        result = await desktop.act("pyautogui.moveTo(77, 66)")
        assert result.ok, result
        assert await desktop.cursor_position() == (77, 66)
        assert proxy.forwarded[-2:] == ["/execute", "/cursor_position"]
        assert (await warm.act("pyautogui.moveTo(88, 99)")).ok
        assert await warm.cursor_position() == (88, 99)
        assert await warm.screen_size() == (1280, 720)
        sandbox = warm.sandbox()
        assert sandbox is not None
        assert (await sandbox.run("python", "print(6 * 7)")).stdout == "42\n"
    finally:
        await desktop.close()
        await warm.close()


async def test_executor_dies_with_a_killed_server(
    server_factory: Callable[..., Any], find_processes: Callable[[str], list[int]]
) -> None:
    own = server_factory()
    async with own.client() as client:
        assert (await client.action("print('warm')")).ok
    executor = [pid for pid in find_processes("executor_child.py") if _parent(pid) == own.proc.pid]
    assert len(executor) == 1
    own.proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(own.proc.wait, 10)
    assert await _eventually(lambda: not _alive(executor[0]))


async def test_sigterm_during_a_long_command_exits_promptly(
    server_factory: Callable[..., Any], find_processes: Callable[[str], list[int]]
) -> None:
    own = server_factory()
    async with own.client() as client:
        pending = asyncio.ensure_future(client.execute(["sleep", "300.441"], timeout=250))
        assert await _eventually(lambda: bool(find_processes("sleep 300.441")))
        started = time.monotonic()
        own.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(own.proc.wait, 15)
        assert time.monotonic() - started < 8
        outcome = await asyncio.gather(pending, return_exceptions=True)
    assert isinstance(outcome[0], ReplyLost) or outcome[0].status in ("error", "timeout")
    assert find_processes("sleep 300.441") == []
