"""The provider-neutral conformance suite against a simulated emulator through real adb.

Android has no sandbox (no coding agent on a phone), so the checks that need one are skipped;
revert is covered by `test_android_environment.py::test_revert_loads_the_start_snapshot`.
"""

from __future__ import annotations

import json

import pytest

from environments.android import AndroidEnvironment
from environments.conformance import CHECKS, ConformanceKit, run_conformance

pytestmark = pytest.mark.integration

ANDROID_KIT = ConformanceKit(
    click=lambda x, y: json.dumps([{"op": "tap", "x": x, "y": y}]),
    open_editor=lambda path: json.dumps([{"op": "open", "app": "Notes"}]),
    type_text=lambda text: json.dumps([{"op": "text", "text": text}]),
    save_editor=json.dumps([{"op": "key", "key": "enter"}]),
    settle=0.0,
)
NEEDS_SANDBOX = {
    "sandbox_writes_only_home",
    "sandbox_hides_host",
    "sandbox_hides_secrets",
    "no_network",
    "timeout_kills_children",
    "typed_text_round_trips",
    "revert_restores",
}


@pytest.mark.parametrize("check", list(CHECKS))
async def test_android_emulator_conforms(check: str, android_env: AndroidEnvironment) -> None:
    if check in NEEDS_SANDBOX:
        pytest.skip("needs a sandbox; Android environments have none (no coding agent on a phone)")
    await CHECKS[check](android_env, ANDROID_KIT)


async def test_run_conformance_reverts_between_checks(android_env: AndroidEnvironment) -> None:
    results = await run_conformance(android_env, ANDROID_KIT, names=["screenshot_png", "click_lands"])
    assert results == {"screenshot_png": None, "click_lands": None}
