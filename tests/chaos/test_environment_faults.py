"""Environment faults on real desktops (N=2, Behavior Judge, the wide tests' scripted models
over HTTP): one process of rollout 1's desktop is SIGKILLed mid-rollout — the X server, an
app of the desktop (the window manager), or the controller server — and that rollout is retried on a fresh desktop while the
other keeps its step count, and the selection still happens."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from chaos_helpers import Figures
from runner_helpers import desktops_missing
from test_wide_desktop import _solver, _wrong_item, run_wide

from environments.local.kind import LocalSettings
from runner.environments import open_pool
from runner.rollout import StepEvent

pytestmark = [pytest.mark.chaos, pytest.mark.desktop, pytest.mark.integration]


def _victim(env: Any, part: str) -> int:
    desktop = env.desktop
    pids = desktop.infra_pids()
    if part == "xvfb":
        return pids["xvfb"]
    if part == "server":
        return pids["server"]
    return pids["wm"]  # the window manager, the app every window needs


@pytest.mark.parametrize("part", ["xvfb", "app-wm", "server"])
async def test_a_killed_environment_is_retried_fresh_and_the_rest_untouched(
        part: str, tmp_path: Path, figures: Figures) -> None:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    killed: list[int] = []
    killed_names: list[str] = []
    holder: list[Any] = []

    async def kill_once(event: StepEvent) -> None:
        if event.rollout != 1 or killed:
            return
        header = event.rollout_dir.read_info()
        env = next(e for e in holder[0].provider.environments if e.name == header.environment)
        killed.append(_victim(env, part))
        killed_names.append(env.name)
        os.kill(killed[-1], signal.SIGKILL)

    async with open_pool(LocalSettings(base_dir=tmp_path / "envs"), size=2) as pool:
        holder.append(pool)
        ran = await run_wide(tmp_path, pool, {"solver": _solver(), "wrong-item": _wrong_item()},
                             wide={"max_retries": 1}, hooks=[kill_once])
        victims = {e.name: _victim(e, part) for e in pool.provider.environments if e.desktop.problem() is None}
    headers = ran.layout.task(ran.task.id).headers()
    selection = ran.strategy.selections[ran.task.id]
    figures(f"env_fault_{part}_killed", len(killed))
    figures(f"env_fault_{part}_attempts_of_faulted_rollout", headers[1].attempts)
    figures(f"env_fault_{part}_other_rollout_steps", headers[0].step_count)
    figures(f"env_fault_{part}_selection_made", int(selection is not None and selection.chosen is not None))
    assert killed
    assert headers[0].attempts == 1 and headers[0].step_count == len(_solver().plan) and headers[0].status == "done"
    assert headers[1].attempts == 2 and headers[1].status == "done"
    # The retry ran on a live desktop: the other one (once rollout 0 freed it) or the killed
    # one's replacement, never beside the dead process.
    assert headers[1].environment is not None
    assert headers[1].environment != killed_names[0] or victims.get(killed_names[0]) not in (None, killed[0])
    assert selection is not None and selection.chosen == 0 and sorted(selection.candidates) == [0, 1]
