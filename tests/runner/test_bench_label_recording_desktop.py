"""``agent-s3 bench local`` on a real desktop with ``rollout.record``: the results say they
are not leaderboard-comparable (summary.json, the terminal, report.html, the export's
args.json), each rollout's screen is saved as an mp4 that ffprobe reads, report.html plays
and links it, and OSWorld's result reader reads the export as the summary counts it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from osworld_reader import get_result
from runner_helpers import desktops_missing

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

AGENT = Path(sys.executable).with_name("agent-s3")
TASK = "mousepad-append-line"
NOTE = "not leaderboard-comparable (Debian app versions, Chromium for Chrome)"


def _probe(video: Path) -> dict:
    done = subprocess.run(["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams",
                           str(video)], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.timeout(420)
def test_bench_local_is_labelled_recorded_and_exported(tmp_path: Path) -> None:
    reason = desktops_missing() or (None if shutil.which("ffprobe") else "ffprobe is not installed")
    if reason is not None:
        pytest.skip(reason)
    out, results = tmp_path / "runs", tmp_path / "results"
    done = subprocess.run(
        [str(AGENT), "bench", "local", "--task", TASK, "--model", "scripted/demo", "--strategy", "single",
         "--settle", "0.3", "--out", str(out), "--run-id", "rec", "--export", str(results),
         "-c", "rollout.record=true"],
        env={**os.environ, "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "200"},
        capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"scored by desktop-env 1.0.2; {NOTE}" in done.stdout

    run = out / "rec"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["leaderboard_comparable"] is False and summary["comparability_note"] == NOTE
    assert summary["scorer"] == "desktop-env 1.0.2" and summary["overall"]["selected"] == 1.0

    video = run / TASK / "rollout-0" / "recording.mp4"
    assert video.is_file() and not (video.parent / "recording-error.txt").exists()
    probe = _probe(video)
    assert "mp4" in probe["format"]["format_name"] and float(probe["format"]["duration"]) > 0.5
    assert [s["codec_name"] for s in probe["streams"] if s["codec_type"] == "video"] == ["h264"]

    html = (run / "report.html").read_text()
    src = f"{TASK}/rollout-0/recording.mp4"
    assert f'<video controls preload="none" width="400" src="{src}">' in html and f'<a href="{src}">' in html
    assert NOTE in html

    args = json.loads((results / "pyautogui" / "screenshot" / "demo" / "args.json").read_text())
    assert args["leaderboard_comparable"] is False and args["comparability_note"] == NOTE
    exported = results / "pyautogui" / "screenshot" / "demo"
    task_folder = next(exported.glob(f"*/{TASK}"))
    assert (task_folder / "recording.mp4").read_bytes() == video.read_bytes()
    read = get_result("pyautogui", "demo", "screenshot", str(results))
    assert read is not None and read.overall == summary["overall"]["selected"]
    assert {d: read.domain_rate(d) for d in read.scores} == {
        d: g["selected"] for d, g in summary["domains"].items()}
