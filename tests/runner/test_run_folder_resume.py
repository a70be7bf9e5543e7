"""`--resume` of a run killed before it wrote its configuration starts it; a run id that was
never started is still one line saying what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.trajectory import RunLayout
from runner.run_folder import RunFolderChoice, check_run_folder


def test_a_run_killed_before_its_configuration_is_resumed_by_starting_it(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "killed")
    layout.path.mkdir(parents=True)  # what `run` leaves when killed while its desktop starts
    assert check_run_folder(layout, "t", "single", resume=True, overwrite=False) == "new"
    (layout.path / "ledger.jsonl").write_text("")
    assert check_run_folder(layout, "t", "single", resume=True, overwrite=False) == "new"
    with pytest.raises(RunFolderChoice, match="already exists: pass --resume"):
        check_run_folder(layout, "t", "single", resume=False, overwrite=False)


def test_resume_still_checks_a_run_that_started(tmp_path: Path) -> None:
    missing = RunLayout(tmp_path, "never")
    with pytest.raises(RunFolderChoice, match="there is no run never"):
        check_run_folder(missing, "t", "single", resume=True, overwrite=False)
    layout = RunLayout(tmp_path, "started")
    layout.path.mkdir(parents=True)
    (layout.path / "config.json").write_text(json.dumps({"strategy": "wide"}))
    with pytest.raises(RunFolderChoice, match="used strategy wide"):
        check_run_folder(layout, "t", "single", resume=True, overwrite=False)
    assert check_run_folder(layout, "t", "wide", resume=True, overwrite=False) == "resume"
