"""Fixtures of the security suite: hostile desktops, host canaries and the escape tally.

Every attack runs as the model would run it: pyautogui-style action code through the
desktop's `/action` executor (the GUI agent) or code through its sandbox (the coding agent),
plus the host's own calls (revert, the evaluator's `/file`). The host side holds canaries a
desktop must never read or change: a root-only folder with a secret and a target file, and
the desktops' token files. Each test appends ``attack: attempts N escapes M`` to
$SECURITY_FIGURES (for benchmarks/security.py) and fails on any escape.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from security_helpers import Canary, Tally, record

from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.server_env import server_environment
from environments.local.spawner import run_all

_NEEDS = ("Xvfb", "openbox", "mousepad", "xterm", "dbus-daemon", "bwrap", "xdotool", "wmctrl", "setpriv")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "security: attack chains against the desktop confinement")


@pytest.fixture(scope="session")
def canary() -> Iterator[Canary]:
    folder = Path("/var/lib") / f"agent-s3-canary-{secrets.token_hex(4)}"
    folder.mkdir(mode=0o700)
    secret_text = "CANARY-" + secrets.token_hex(16)
    secret = folder / "secret.txt"
    secret.write_text(secret_text)
    secret.chmod(0o600)
    target = folder / "target.txt"
    target.write_text("original\n")
    target.chmod(0o644)
    found = Canary(folder, secret, target, secret_text)
    found.prints = found.fingerprint()
    yield found
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def hostile_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LocalDesktop]]:
    """Two desktops of one run (rollouts 1 and 2), attacked by model code."""
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (install the desktop Debian packages)")
    if os.geteuid() != 0:
        pytest.skip("local desktops need root to start their sandboxes")
    base = tmp_path_factory.mktemp("security-envs")
    desktops = [
        LocalDesktop(f"hostile-{i}", base, DesktopConfig(snapshot="mousepad"), pool="security")
        for i in (1, 2)
    ]
    try:
        run_all([d.start for d in desktops])
        yield desktops
    finally:
        run_all([d.close for d in desktops])


@pytest.fixture
async def pair(hostile_pair: list[LocalDesktop]) -> AsyncIterator[list[LocalEnvironment]]:
    """Both desktops as environments, reverted first."""

    async def keep(_: LocalEnvironment) -> None:
        return None

    envs = [LocalEnvironment(d, server_environment(d), on_close=keep) for d in hostile_pair]
    for env in envs:
        await env.revert()
    yield envs
    for env in envs:
        await env.close()


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    found = Tally(request.node.name.removeprefix("test_"))
    yield found
    if not found.split:
        record(found)
