"""Every real OSWorld task file loads, and the support report names what runs here and what does not."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from core.trajectory import Task
from environments.tasks import iter_task_files, load_task, load_task_list
from environments.tasks.android_suite import platform_task
from environments.tasks.steps import step_supported
from environments.tasks.support import support_report, task_gaps
from reference_data import OSWORLD_TASKS as REFERENCE
from reference_data import requires_osworld_tasks

pytestmark = requires_osworld_tasks


@pytest.fixture(scope="module")
def all_tasks():  # type: ignore[no-untyped-def]
    ubuntu = [load_task(p, d) for d, p in iter_task_files(REFERENCE / "examples")]
    windows = [load_task(p, d) for d, p in iter_task_files(REFERENCE / "examples_windows")]
    return ubuntu, windows


def test_every_file_loads(all_tasks) -> None:
    ubuntu, windows = all_tasks
    assert len(ubuntu) == 369 and len(windows) == 49
    for task in ubuntu + windows:
        assert task.source_path is not None and task.id == Path(task.source_path).stem
        assert task.evaluator.calls()


@pytest.mark.parametrize(
    ("name", "count"), [("test_all.json", 369), ("test_nogdrive.json", 361), ("test_small.json", 39)]
)
def test_task_lists_load(name: str, count: int) -> None:
    tasks = load_task_list(REFERENCE / name)
    assert len(tasks) == count and len({t.id for t in tasks}) == count


def test_support_report_counts(all_tasks, capsys) -> None:
    ubuntu, windows = all_tasks
    report = support_report(ubuntu)
    # The reference notes' figures: tasks whose `config` uses each step type, over 369 tasks.
    in_config = Counter(kind for t in ubuntu for kind in {s.type for s in t.config})
    assert [in_config[k] for k in ("download", "launch", "open", "execute", "command")] == [
        260,
        175,
        152,
        104,
        22,
    ]
    assert report.tasks == 369 and report.steps["download"] >= 260
    assert report.metrics["compare_table"] == 60 and report.metrics["infeasible"] == 29
    for kind, names in {
        "step": {
            "execute",
            "command",
            "launch",
            "open",
            "sleep",
            "download",
            "activate_window",
            "close_window",
        },
        "getter": {"vm_file", "vm_command_line", "rule", "cloud_file", "cache_file"},
        "metric": {
            "exact_match",
            "check_include_exclude",
            "compare_text_file",
            "compare_table",
            "infeasible",
        },
    }.items():
        assert names <= set(report.supported_names(kind)), kind
    # OSWorld's controller has the Google steps; the account files they need are what is missing.
    assert {"googledrive", "login"} <= set(report.supported_names("step"))
    assert report.refused["credentials:evaluation_examples/settings/googledrive/settings.yml"] == 8
    # chrome_open_tabs runs through OSWorld's own setup controller (Playwright is in the dev extras).
    assert "chrome_open_tabs" in report.supported_names("step") and step_supported("chrome_open_tabs")
    # Metrics are OSWorld's own functions: the pptx comparison the project never had is here now.
    assert {"compare_pptx_files", "compare_docx_files", "compare_pdfs"} <= set(
        report.supported_names("metric")
    )
    assert report.infeasible == 29 and "scorer: desktop-env 1.0.2" in report.format()
    assert 0 < report.offline < report.runnable < report.tasks
    # Every task is either runnable or has named gaps.
    assert report.runnable == sum(1 for t in ubuntu if not task_gaps(t))
    assert sum(d.vm_metric + d.vm_infeasible for d in report.domains.values()) == report.runnable
    assert sum(d.vm_infeasible for d in report.domains.values()) == report.infeasible == 29
    assert sum(d.here_metric + d.here_infeasible for d in report.domains.values()) == report.local
    text = report.format()
    print(text)
    print(support_report(windows).format())
    on_windows = support_report(windows, installed=lambda _: True, platform="windows")
    assert on_windows.local == 0 < on_windows.runnable  # OSWorld's Windows image, never these Linux desktops
    assert on_windows.missing_programs["platform:windows"] == on_windows.runnable
    out = capsys.readouterr().out
    assert (
        "tasks 369: runnable here" in out and "tasks 49: runnable here" in out and "chrome_open_tabs" in out
    )
    assert "on OSWorld's VM image: " in out and "coverage by domain" in out


def test_reference_examples_gaps(all_tasks) -> None:
    ubuntu, _ = all_tasks
    by_id = {t.id: t for t in ubuntu}
    assert task_gaps(by_id["e0df059f-28a6-4169-924f-b9623e7184cc"]) == []
    assert task_gaps(by_id["5ced85fc-fa1a-4217-95fd-0fb530545ce2"]) == []
    chrome = next(t for t in ubuntu if any(s.type == "chrome_open_tabs" for s in t.config))
    assert "step:chrome_open_tabs" not in task_gaps(chrome)


def test_core_task_round_trip(all_tasks) -> None:
    """Every OSWorld task file, loaded, written as a run folder's task.json and read back,
    exports as the very JSON it was read from (no key added, none lost)."""
    ubuntu, windows = all_tasks
    for tasks, platform in [(ubuntu, "ubuntu"), (windows, "windows")]:
        for task in tasks:
            record = platform_task(task, platform)
            assert record.platform == platform and record.source_path is not None
            back = Task.model_validate_json(record.model_dump_json())  # a run folder's task.json
            assert back.model_dump() == record.model_dump()
            assert back.to_osworld() == json.loads(Path(record.source_path).read_text()), task.id
            assert back.base_dir == task.base_dir == Path(record.source_path).parent


def test_command_line_report_skips_bad_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "os").mkdir()
    (tmp_path / "os" / "good.json").write_text(
        '{"id": "good", "instruction": "x", "config": [{"type": "login", "parameters": {}}], "evaluator": {"func": "exact_match"}}'
    )
    (tmp_path / "os" / "bad.json").write_text('{"id": "bad"}')
    done = subprocess.run(
        [sys.executable, "-m", "environments.tasks", "--offline", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "tasks 1: runnable here 0" in done.stdout and "credentials:(none named)" in done.stdout
    assert "skipped:" in done.stderr and "bad.json (task bad): required field 'instruction' is missing; required field 'evaluator' is missing" in done.stderr


def test_programs_and_openers_a_task_needs(all_tasks) -> None:
    """What a task starts or opens, from its steps: the basis of the local count."""
    ubuntu, _ = all_tasks
    from environments.tasks.support import openers, programs

    chrome = next(t for t in ubuntu if any(s.type == "chrome_open_tabs" for s in t.config))
    assert "google-chrome" in programs(chrome)
    vlc = [
        t
        for t in ubuntu
        if t.domain == "vlc" and any("vlc" in str(s.parameters.get("command")) for s in t.config)
    ]
    assert vlc and all("vlc" in programs(t) for t in vlc)  # `VLC_VERBOSE=-1 vlc` shell lines too
    impress = [t for t in ubuntu if t.domain == "libreoffice_impress"]
    pptx = "opener:application/vnd.openxmlformats-officedocument.presentationml.presentation"
    assert sum(pptx in openers(t) for t in impress) > 30
    everything = support_report(ubuntu, installed=lambda need: True)
    nothing_extra = support_report(ubuntu, installed=lambda need: need != "gimp")
    assert everything.local == everything.runnable and not everything.missing_programs
    assert nothing_extra.missing_programs == {"program:gimp": nothing_extra.runnable - nothing_extra.local}
    assert "blocked here only (apps, network)" in nothing_extra.format()
    offline = support_report(ubuntu, installed=lambda need: True, network=False)
    assert offline.runnable == everything.runnable and offline.local == offline.offline < offline.runnable


@pytest.mark.desktop
@pytest.mark.integration
def test_the_report_asks_a_desktop_not_the_host(tmp_path: Path) -> None:
    """`python -m environments.tasks` answers for a local desktop: its sudo and python count, a
    program only the host has (in the host's /usr/local, which desktops do not show) does not,
    nor a module only the project's interpreter has (OpenCV)."""
    import os
    import secrets
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("local desktops need root and bubblewrap")
    host_only = Path("/usr/local/bin") / f"agent-s3-host-only-{secrets.token_hex(3)}"
    (tmp_path / "os").mkdir()

    def task(name: str, command: object) -> None:
        step = {"type": "execute", "parameters": {"command": command, "shell": isinstance(command, str)}}
        data = {"id": name, "instruction": "x", "config": [step], "evaluator": {"func": "exact_match"}}
        (tmp_path / "os" / f"{name}.json").write_text(json.dumps(data))

    task("sudo-and-python", "echo {CLIENT_PASSWORD} | sudo -S mkdir ~/x && python -c 'import pyautogui, numpy'")
    task("host-only-program", [host_only.name, "--version"])
    task("opencv", ["python3", "-c", "import cv2"])
    host_only.write_text("#!/bin/sh\nexit 0\n")
    host_only.chmod(0o755)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "environments.tasks", "--offline", "--per-task", str(tmp_path)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        host_only.unlink()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "here means: a local desktop" in out and "tasks 3: runnable here 1" in out, out
    refusals = out.split("refusals per task", 1)[1]
    assert f"host-only-program: program:{host_only.name} (here)" in refusals
    assert "opencv: module:cv2 (here)" in refusals
    assert "sudo-and-python" not in refusals


def test_known_differences_are_named_per_task(all_tasks) -> None:
    """What makes a local desktop score a task differently from OSWorld's image, per task."""
    from environments.tasks.differences import task_differences

    ubuntu, _ = all_tasks
    by_id = {t.id[:8]: t for t in ubuntu}
    met = {key: {d.key for d in task_differences(by_id[key])} for key in ("937087b6", "b6781586", "ec4e3f68", "e0df059f")}
    assert "default-apps" in met["937087b6"]  # VLC is the default video player here, Totem there
    assert "system-services" in met["b6781586"]  # timedatectl needs systemd
    assert met["ec4e3f68"] == {"gnome", "account"}  # a Shell favourite list, /run/user/1000
    assert met["e0df059f"] == set()  # a folder renamed: nothing differs
    report = support_report(ubuntu, installed=lambda _: True, network=False)
    assert report.differences_by_task and set(report.differences) <= {"chromium", "app-builds", "default-apps", "gnome", "system-services", "system-files", "account"}
    assert "may score differently here" in report.format()
