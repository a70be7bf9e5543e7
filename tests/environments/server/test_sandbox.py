"""The bubblewrap sandbox: only its home writable, host secrets and network out of reach."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from environments.server.sandbox import BwrapSandbox

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap as root"),
]

NOBODY = 65534


def _absent(*paths: Path) -> bool:
    return not any(path.exists() for path in paths)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "envs" / "e1" / "home"
    folder.mkdir(parents=True)
    os.chown(folder, NOBODY, NOBODY)
    return folder


@pytest.fixture
def root_secret() -> Iterator[Path]:
    path = Path("/root") / f".agent-s3-test-secret-{secrets.token_hex(4)}"
    path.write_text("root-only-secret")
    yield path
    path.unlink(missing_ok=True)


async def test_runs_as_nobody_with_a_writable_home_only(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    box = BwrapSandbox(home)
    result = await box.run(
        "bash",
        f"id -u; echo $HOME; echo hi > note.txt; echo x > {outside}; echo y > /var/tmp/escape-{home.name}; "
        "echo z > /etc/escape; true",
    )
    assert result.ok, result
    uid, shown_home = result.stdout.split()[:2]
    assert uid == str(NOBODY) and shown_home == str(home)
    assert (home / "note.txt").read_text() == "hi\n"
    assert (home / "note.txt").stat().st_uid == NOBODY
    assert _absent(outside, Path(f"/var/tmp/escape-{home.name}"), Path("/etc/escape"))
    assert len(result.stderr.splitlines()) == 3  # each escape attempt failed


async def test_home_inside_a_hidden_folder_stays_reachable(home: Path, tmp_path: Path) -> None:
    """The envs folder is hidden, yet the one home bound back into it is usable."""
    sibling = tmp_path / "envs" / "e2" / "home"
    sibling.mkdir(parents=True)
    (sibling / "other.txt").write_text("not yours")
    box = BwrapSandbox(home, hidden=[str(tmp_path / "envs")])
    result = await box.run("bash", f"echo ok > $HOME/mine.txt && cat $HOME/mine.txt; cat {sibling}/other.txt")
    assert result.stdout == "ok\n", result
    assert "No such file" in result.stderr
    assert (home / "mine.txt").read_text() == "ok\n"


async def test_cannot_read_host_homes_run_folders_or_env_secrets(
    home: Path, tmp_path: Path, root_secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "ledger.jsonl").write_text("run-folder-secret")
    sibling = tmp_path / "envs" / "e2" / "home"
    sibling.mkdir(parents=True)
    (sibling / "other.txt").write_text("other-desktop-secret")
    monkeypatch.setenv("FAKE_PROVIDER_API_KEY", "sk-fake-secret-123")
    box = BwrapSandbox(home, hidden=[runs, tmp_path / "envs"])
    result = await box.run(
        "bash",
        f"cat {root_secret}; cat {runs}/ledger.jsonl; cat {sibling}/other.txt; ls /root /home; env; "
        "cat /proc/1/environ | tr '\\0' '\\n'; echo done",
    )
    everything = result.stdout + result.stderr
    assert "done" in result.stdout
    for secret in ("root-only-secret", "run-folder-secret", "other-desktop-secret", "sk-fake-secret-123"):
        assert secret not in everything
    assert "FAKE_PROVIDER_API_KEY" not in everything


async def test_no_network_beyond_its_own_loopback(home: Path) -> None:
    accepted: list[bool] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(True)
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        _, host_side = await asyncio.open_connection("127.0.0.1", port)
        host_side.close()
        for _ in range(40):
            if accepted:
                break
            await asyncio.sleep(0.05)
        assert accepted == [True], "the host itself can connect to the listener"
        result = await BwrapSandbox(home).run(
            "python",
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('refused', type(exc).__name__)\n",
        )
    finally:
        listener.close()
        await listener.wait_closed()
    assert result.stdout.startswith("refused"), result
    assert accepted == [True]


async def test_killed_at_its_timeout_with_its_children(
    home: Path, find_processes: Callable[[str], list[int]]
) -> None:
    started = time.monotonic()
    result = await BwrapSandbox(home).run("bash", "sleep 300.331 & sleep 300.332 & wait", timeout=1.0)
    assert result.status == "timeout"
    assert time.monotonic() - started < 5
    for _ in range(60):
        if not find_processes("sleep 300.33"):
            break
        await asyncio.sleep(0.05)
    assert find_processes("sleep 300.33") == []


async def test_output_is_trimmed_to_head_and_tail(home: Path) -> None:
    result = await BwrapSandbox(home, output_limit=1000).run(
        "python", "print('HEAD' + 'x' * 100000 + 'TAIL')"
    )
    assert result.ok
    assert result.stdout.startswith("HEAD") and result.stdout.rstrip().endswith("TAIL")
    assert "bytes omitted" in result.stdout and len(result.stdout) < 1200


@pytest.mark.desktop
async def test_server_runs_agent_code_in_the_sandbox(
    server_factory: Callable[..., Any], home: Path, root_secret: Path
) -> None:
    boxed = server_factory(
        "--sandbox", "bwrap", "--sandbox-home", str(home), env={"FAKE_PROVIDER_API_KEY": "sk-fake-secret-456"}
    )
    async with httpx.AsyncClient(base_url=boxed.url, headers=boxed.headers, timeout=30) as http:
        bash = await http.post(
            "/run_bash_script",
            json={"script": f"id -u; env; cat {root_secret}; echo made > mine.txt", "timeout": 20},
        )
        python = await http.post("/run_python", json={"code": "import os; print(os.getuid(), os.getcwd())"})
        screen = await http.post(
            "/run_python_script",
            json={
                "code": "import subprocess; print(subprocess.run(['xdpyinfo'], capture_output=True).returncode)"
            },
        )
    output = bash.json()["output"]
    assert bash.status_code == 200
    assert output.splitlines()[0] == str(NOBODY)
    assert (
        "sk-fake-secret-456" not in output
        and "AGENT_S3_SERVER_TOKEN" not in output
        and boxed.token not in output
    )
    assert "root-only-secret" not in output
    assert (home / "mine.txt").read_text() == "made\n"
    assert python.json()["output"] == f"{NOBODY} {home}\n"
    if shutil.which("xdpyinfo"):
        assert screen.json()["output"] == "0\n", screen.json()
