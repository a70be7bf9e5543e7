"""The support report lists every refusal of a task, read from OSWorld's own package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from environments.tasks import official_surface as surface
from environments.tasks.loader import parse_task
from environments.tasks.official import register_metrics_package
from environments.tasks.support import ignored_options, support_report, task_gaps, task_refusals


def _task(**evaluator: Any) -> Any:
    data = {"id": "t1", "instruction": "x", "config": [], "evaluator": evaluator}
    return parse_task(data, domain="os")


def test_two_refused_options_of_one_metric_are_both_listed() -> None:
    # exact_match(result, rules) has no **options: OSWorld's call would raise TypeError for each.
    task = _task(func="exact_match", result={"type": "vm_command_line", "command": "true"},
                 expected={"type": "rule", "rules": {"expected": ""}}, options={"first_bad": 1, "second_bad": 2})
    keys = [r.key for r in task_refusals(task, installed=lambda _: True)]
    assert keys == ["option:exact_match.first_bad", "option:exact_match.second_bad"]
    assert task_gaps(task) == keys


def test_every_refusal_of_a_task_is_listed_with_its_scope() -> None:
    task = parse_task({
        "id": "t2", "instruction": "x",
        "config": [{"type": "launch", "parameters": {"command": ["gimp"]}},
                   {"type": "launch", "parameters": {"command": "vlc --fullscreen"}},
                   {"type": "tidy_desktop", "parameters": {}},
                   {"type": "no_such_step", "parameters": {}},
                   {"type": "download", "parameters": {"files": [{"url": "https://example.org/a", "path": "/tmp/a"}]}}],
        "evaluator": {"func": ["no_such_metric", "exact_match"], "conj": "or",
                      "result": [{"type": "no_such_getter"}, {"type": "vm_command_line", "command": "true"}],
                      "expected": [None, {"type": "rule", "rules": {"expected": ""}}],
                      "options": [{}, {"bogus": True}]},
    }, domain="os")
    refusals = task_refusals(task, installed=lambda need: False, network=False)
    scopes = {r.key: r.scope for r in refusals}
    assert scopes == {
        "step:tidy_desktop": "everywhere", "step:no_such_step": "everywhere",
        "metric:no_such_metric": "everywhere", "option:exact_match.bogus": "everywhere",
        "getter:no_such_getter": "everywhere",
        "program:gimp": "here", "program:vlc": "here", "network:download": "here",
    }
    assert "NotImplementedError" in next(r.reason for r in refusals if r.key == "step:tidy_desktop")
    report = support_report([task], installed=lambda need: False, network=False)
    assert report.refusals["t2"] == refusals and report.runnable == report.local == 0
    assert report.refused["option:exact_match.bogus"] == 1 and "program:gimp" not in report.refused
    per_task = report.format(per_task=True)
    assert "t2: step:tidy_desktop (everywhere)" in per_task and "program:vlc (here)" in per_task


def test_an_option_a_metric_ignores_is_no_refusal() -> None:
    # compare_pptx_files(file1, file2, **options) never reads `_note`: OSWorld scores the task anyway.
    task = _task(func="compare_pptx_files", result={"type": "vm_file", "path": "/a.pptx", "dest": "a.pptx"},
                 expected={"type": "cloud_file", "path": "https://x/b.pptx", "dest": "b.pptx"},
                 options={"_note": "why", "examine_shape": False})
    assert not task_refusals(task, installed=lambda _: True)
    assert ignored_options(task) == ["compare_pptx_files._note"]


def test_metric_and_infeasible_are_counted_apart() -> None:
    feasible = _task(func="exact_match", result={"type": "vm_command_line", "command": "true"},
                     expected={"type": "rule", "rules": {"expected": ""}})
    infeasible = parse_task({"id": "t3", "instruction": "y", "evaluator": {"func": "infeasible"}}, domain="os")
    report = support_report([feasible, infeasible], installed=lambda _: True)
    assert (report.runnable, report.infeasible, report.local, report.local_infeasible) == (2, 1, 2, 1)
    data = report.to_json()
    assert data["on_osworld_vm_image"] == {"runnable": 2, "scored_by_metric": 1, "infeasible": 1, "offline": 2}
    assert data["domains"]["os"] == {"tasks": 2, "vm_metric": 1, "vm_infeasible": 1,
                                     "here_metric": 1, "here_infeasible": 1}


def test_step_and_getter_types_match_the_imported_package() -> None:
    """The source reading agrees with the live objects: no list is kept by hand."""
    register_metrics_package()
    from desktop_env.controllers.setup import SetupController

    live = {n[1:-6] for n in dir(SetupController) if n.startswith("_") and n.endswith("_setup") and n[1:-6]}
    assert set(surface.step_types()) == live
    assert {n for n, f in surface.step_types().items() if f.refused} == {"tidy_desktop", "act", "replay"}
    getters_init = surface.desktop_env_dir() / "evaluators" / "getters" / "__init__.py"
    exported = {w.strip(" ,()\n") for w in getters_init.read_text().split() if w.strip(" ,()\n").startswith("get_")}
    assert {f"get_{n}" for n in surface.getter_types()} == exported
    assert {"vm_file", "cloud_file", "rule", "vm_command_line"} <= set(surface.getter_types())


def test_command_line_json(tmp_path: Path) -> None:
    (tmp_path / "os").mkdir()
    (tmp_path / "os" / "t.json").write_text(json.dumps({
        "id": "t", "instruction": "x", "config": [{"type": "launch", "parameters": {"command": ["gimp"]}}],
        "evaluator": {"func": "exact_match", "options": {"a": 1, "b": 2},
                      "result": {"type": "vm_command_line", "command": "true"},
                      "expected": {"type": "rule", "rules": {"expected": ""}}}}))
    done = subprocess.run([sys.executable, "-m", "environments.tasks", "--json", "--offline", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["scorer"] == "desktop-env 1.0.2" and data["network"] is False
    assert [r["name"] for r in data["refusals"]["t"] if r["kind"] == "option"] == ["exact_match.a", "exact_match.b"]
    assert data["on_osworld_vm_image"]["runnable"] == 0


def test_without_the_official_package_every_task_is_refused_in_one_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from environments.tasks import official

    def missing() -> None:
        raise official.MissingScorer("OSWorld's scorer is not installed: pip install 'agent-s3[osworld]'")

    caches = [surface.desktop_env_dir, surface.step_types, surface.getter_types, surface.metric_types,
              surface.metric_option_keys, official.package_root, official._exports]
    for cached in caches:
        cached.cache_clear()
    monkeypatch.setattr(official, "package_root", missing)
    try:
        task = _task(func="exact_match", result={"type": "vm_command_line", "command": "true"},
                     expected={"type": "rule", "rules": {"expected": ""}})
        assert task_gaps(task) == ["scorer:desktop-env"]
        report = support_report([task], installed=lambda _: True)
        assert report.runnable == 0 and "not installed: OSWorld's scorer is not installed" in report.format()
        assert "pip install 'agent-s3[osworld]'" in report.reasons["scorer:desktop-env"]
    finally:
        monkeypatch.undo()
        for cached in caches:
            cached.cache_clear()


def test_every_missing_package_of_a_feature_is_named() -> None:
    feature = surface.Feature("m", "evaluators/metrics/x.py", "m", frozenset({"json", "nope_pkg_b", "nope_pkg_a"}))
    assert surface.missing_packages(feature) == ["nope_pkg_a", "nope_pkg_b"]
    # The one official metric whose module needs torch's OCR, named with what to install.
    ocr = surface.metric_types()["compare_image_text"]
    assert "easyocr" in ocr.packages
    task = _task(func="compare_image_text", result={"type": "vm_file", "path": "/a.png", "dest": "a.png"},
                 expected={"type": "rule", "rules": {"type": "text", "text": "x"}})
    keys = [r.key for r in task_refusals(task, installed=lambda _: True)]
    assert keys == ([] if surface.missing_packages(ocr) == [] else ["package:easyocr (metric compare_image_text)"])


def test_programs_come_from_every_shell_segment_and_command_getter() -> None:
    """What a desktop must have: the programs of every segment of a shell command (past sudo,
    timeout and assignments), in setup steps and in the getters that run commands."""
    from environments.tasks.support import needs, programs

    data = {
        "id": "t2",
        "instruction": "x",
        "config": [
            {"type": "execute", "parameters": {"command": "echo pw | sudo -S apt install xsel && xsel -bc", "shell": "true"}},
            {"type": "execute", "parameters": {"command": ["python", "-c", "import pyautogui; import numpy as np"]}},
            {"type": "launch", "parameters": {"command": "VLC_VERBOSE=-1 vlc --no-audio", "shell": True}},
        ],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "shell": True,
                       "command": "pulseaudio --start\npactl list sinks | grep Volume | awk '{print $5}'; "
                                  "TEXT=$(timeout 10 gsettings get org.gnome.desktop.interface x); ./eval.sh"},
            "expected": {"type": "rule", "rules": {"expected": "100\n"}},
        },
    }  # fmt: skip
    task = parse_task(data, domain="os")
    assert programs(task) == {
        "sudo", "apt", "xsel", "python", "vlc", "pulseaudio", "pactl", "grep", "awk", "timeout", "gsettings",
    }  # fmt: skip
    assert {"module:pyautogui", "module:numpy"} <= needs(task)
    refused = [r.key for r in task_refusals(task, installed=lambda need: need not in ("pactl", "module:numpy"))]
    assert refused == ["module:numpy", "program:pactl"]
