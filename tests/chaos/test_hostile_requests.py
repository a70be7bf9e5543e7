"""Hostile requests to the in-desktop controller server: no token → 401, an oversized
upload → 413, and a connection from another network namespace (a veth pair made for this
test, the only non-loopback addresses it touches) is refused while the server is bound to
loopback, and reaches it — still needing the token — when it is bound to the veth address."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chaos_helpers import Figures, load_server_fixtures

pytestmark = [pytest.mark.chaos, pytest.mark.desktop, pytest.mark.integration]

fx = load_server_fixtures()
HOST_ADDR, PEER_ADDR = "10.213.7.1", "10.213.7.2"

PROBE = """
import sys, urllib.request, urllib.error
url, token = sys.argv[1], sys.argv[2]
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
try:
    print(urllib.request.urlopen(request, timeout=5).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
except OSError as exc:
    print("refused" if "refused" in str(exc).lower() else f"error {exc}")
"""


@pytest.fixture(scope="module")
def display() -> Iterator[Any]:
    shown = fx.start_xvfb(640, 480)
    yield shown
    fx.stop(shown.proc)


@pytest.fixture
def netns() -> Iterator[str]:
    """A network namespace joined to this one by a veth pair (10.213.7.1 here, .2 there)."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("needs iproute2 and root to make a network namespace")
    name, here, there = f"chaos{os.getpid()}", f"vc{os.getpid()}a", f"vc{os.getpid()}b"
    commands = [["ip", "netns", "add", name],
                ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
                ["ip", "link", "set", there, "netns", name],
                ["ip", "addr", "add", f"{HOST_ADDR}/30", "dev", here], ["ip", "link", "set", here, "up"],
                ["ip", "-n", name, "addr", "add", f"{PEER_ADDR}/30", "dev", there],
                ["ip", "-n", name, "link", "set", there, "up"], ["ip", "-n", name, "link", "set", "lo", "up"]]
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _probe(netns: str, url: str, token: str = "") -> str:
    done = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", PROBE, url, token],
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or done.stderr.strip()


def test_hostile_requests_are_refused(display: Any, netns: str, tmp_path: Path, figures: Figures) -> None:
    loopback = fx.start_server(display, tmp_path / "loopback", "--max-body-mb", "1")
    exposed = fx.start_server(display, tmp_path / "veth", "--host", HOST_ADDR)
    try:
        with httpx.Client(base_url=loopback.url) as http:
            no_token = http.get("/platform").status_code
            wrong_token = http.post("/execute", json={"command": ["touch", str(tmp_path / "pwned")]},
                                    headers={"Authorization": "Bearer guessed"}).status_code
            upload = http.post("/setup/upload", headers=loopback.headers, data={"file_path": str(tmp_path / "big")},
                               files={"file_data": ("f", os.urandom(2 * 1024 * 1024))}).status_code
            allowed = http.get("/platform", headers=loopback.headers).status_code
        port = loopback.url.rsplit(":", 1)[1]
        from_other_host = _probe(netns, f"http://{HOST_ADDR}:{port}/platform", loopback.token)
        exposed_port = exposed.url.rsplit(":", 1)[1]
        exposed_without = _probe(netns, f"http://{HOST_ADDR}:{exposed_port}/platform")
        exposed_with = _probe(netns, f"http://{HOST_ADDR}:{exposed_port}/platform", exposed.token)
    finally:
        fx.stop(loopback.proc)
        fx.stop(exposed.proc)
    figures("request_without_token", no_token)
    figures("request_with_wrong_token", wrong_token)
    figures("oversized_upload", upload)
    figures("non_loopback_to_loopback_bind", from_other_host)
    figures("non_loopback_to_veth_bind_without_token", exposed_without)
    assert (no_token, wrong_token, upload, allowed) == (401, 401, 413, 200)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "big").exists()
    assert from_other_host == "refused"
    assert (exposed_without, exposed_with) == ("401", "200")  # the path works; only the bind refused it
