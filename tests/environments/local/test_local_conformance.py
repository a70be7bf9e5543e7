"""The provider-neutral conformance suite, run against a real local desktop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core.protocols import Environment
from environments.conformance import CHECKS, DESKTOP_KIT

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


@pytest.mark.parametrize("check", list(CHECKS))
async def test_local_desktop_conforms(
    check: str, desktop_env: Environment, runs_dir: Path, loopback_listener: int, fake_key: str
) -> None:
    kit = dataclasses.replace(
        DESKTOP_KIT,
        hidden_paths=[str(runs_dir / "secret-trajectory.json"), str(Path.cwd() / "pyproject.toml")],
        secrets=[fake_key],
        loopback_port=loopback_listener,
    )
    await CHECKS[check](desktop_env, kit)
