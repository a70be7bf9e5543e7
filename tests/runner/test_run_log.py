"""While a command runs, OSWorld's own log lines and prints go to the run folder's run.log and
stay off the terminal unless asked for (-v); the project's warnings reach the terminal in one
line, their tracebacks only the file; everything is put back afterwards."""

from __future__ import annotations

import logging
import stat
import sys
import threading
from pathlib import Path

import pytest

from environments.tasks.steps import OFFICIAL_THREAD
from runner.run_log import RUN_LOG, run_log


def _in_official_thread(fn: object) -> None:
    worker = threading.Thread(target=fn, name=OFFICIAL_THREAD)  # type: ignore[arg-type]
    worker.start()
    worker.join()


def _official_noise() -> None:
    logging.getLogger("desktopenv.setup").error("Failed to launch application. Status code: 500")
    print("['a', 'b'] ['a', 'c']")  # what OSWorld's exact_match prints
    print("no newline yet", end="")
    print(" ... now", file=sys.stderr)


def test_osworld_lines_go_to_the_file_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (sys.stdout, sys.stderr, len(logging.getLogger().handlers), logging.getLogger("desktopenv").level)
    with run_log(tmp_path / "run") as path:
        _in_official_thread(_official_noise)
        print("the runner's own line")
        try:
            raise KeyError("path")
        except KeyError:
            logging.getLogger("runner.bench").warning("task t failed", exc_info=True)
    out, err = capsys.readouterr()
    assert path == tmp_path / "run" / RUN_LOG
    assert out == "the runner's own line\n"
    assert err == f"warning: task t failed (KeyError: 'path'; traceback in {path})\n"
    text = path.read_text()
    assert "ERROR desktopenv.setup [osworld-official] Failed to launch application. Status code: 500" in text
    assert "desktopenv.output [osworld-official] [stdout] ['a', 'b'] ['a', 'c']" in text
    assert "[stderr]  ... now" in text  # each stream's lines are kept whole
    assert "Traceback (most recent call last)" in text and "KeyError: 'path'" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    after = (sys.stdout, sys.stderr, len(logging.getLogger().handlers), logging.getLogger("desktopenv").level)
    assert after == before


def test_verbose_shows_osworld_lines_on_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with run_log(tmp_path, verbose=True) as path:
        _in_official_thread(_official_noise)
        logging.getLogger("runner.x").info("an info line of the project")
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: desktopenv.setup: Failed to launch application. Status code: 500" in err
    assert "info: desktopenv.output: [stdout] ['a', 'b'] ['a', 'c']" in err
    assert "an info line of the project" not in err  # the project's info stays in the file
    assert path is not None and "an info line of the project" in path.read_text()


def test_without_a_folder_the_terminal_still_gets_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with run_log(None):
        try:
            raise RuntimeError("boom\nsecond line")
        except RuntimeError:
            logging.getLogger("runner.y").error("it broke", exc_info=True)
        logging.getLogger("runner.y").warning("see http://me:secret@host:1/x")
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: it broke (RuntimeError: boom)", "warning: see http://<redacted>@host:1/x"]


def test_library_warnings_go_to_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    with run_log(tmp_path) as path:
        warnings.warn("The `fitz` API is deprecated", FutureWarning, stacklevel=1)
    assert capsys.readouterr().err == ""
    assert path is not None and "FutureWarning: The `fitz` API is deprecated" in path.read_text()
