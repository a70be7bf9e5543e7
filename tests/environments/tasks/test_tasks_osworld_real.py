"""OSWorld's real task files on a real local desktop, through the environment API.

A sample (one task per domain this machine runs offline, `SAMPLE`) is set up and scored
untouched: every one sets up, every scorer runs, doing nothing scores 0, and an infeasible
task answered FAIL scores 1. The same sample goes through ``agent-s3 tasks check`` (where a
task whose untouched state already scores 1 here, a known difference from OSWorld's image, is
flagged) and ``agent-s3 bench osworld`` with the do-nothing policy. Three tasks are solved by scripted
solutions and score 1 through OSWorld's own scorer: one by the coding agent changing the
desktop's settings (gsettings, in the desktop's session), one through ``sudo`` typed into
GNOME Terminal, one in GIMP's window.

The sample needs OSWorld's apps (GIMP, Impress, VLC: ``AGENT_S3_OSWORLD_APPS=1 bash
scripts/setup.sh``, which ``scripts/test.sh`` runs); a task whose app is missing is skipped.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from PIL import Image

from agent_s3 import CodeAgent, CodeAgentConfig
from core.llm import ChatModel, Reply, Script
from core.trajectory import Task
from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.server_env import desktop_client, server_environment
from environments.tasks import load_task
from environments.tasks.readiness import CAP_S
from reference_data import OSWORLD_TASKS, requires_osworld_tasks
from runner.task_check import check_one

pytestmark = [requires_osworld_tasks, pytest.mark.desktop, pytest.mark.integration]

#: (domain, task id prefix, the app it needs, what doing nothing scores, FAIL's score if infeasible)
SAMPLE = [
    ("os", "e0df059f", None, 0.0, None),  # its setup makes a folder with sudo
    ("os", "b3d4a89c", None, 0.0, 1.0),  # infeasible: Bluetooth
    ("gimp", "7b7617bd", "gimp", 0.0, None),  # GIMP's undo levels (gimprc after ctrl+q)
    ("libreoffice_impress", "2cd43775", "soffice", 0.0, None),  # Impress auto-save (registrymodifications.xcu)
    ("vlc", "8ba5ae7a", "vlc", 0.0, None),  # VLC's recordings folder (vlcrc)
    ("multi_apps", "6d72aad6", None, 0.0, 1.0),  # infeasible: Impress to video
]
#: Doing nothing scores 1 here: VLC is the default video player on these desktops (Totem on OSWorld's).
FLAGGED = ("multi_apps", "937087b6", "vlc")


def _task(domain: str, prefix: str) -> Task:
    path = next((OSWORLD_TASKS / "examples" / domain).glob(f"{prefix}*.json"))
    return load_task(path, domain)


@pytest.fixture(scope="module")
def osworld_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDesktop]:
    desktop = LocalDesktop("osworld-real", tmp_path_factory.mktemp("osworld-real"), DesktopConfig(), pool="tests-real")
    desktop.start()
    try:
        yield desktop
    finally:
        desktop.close()


@pytest.fixture
async def env(osworld_desktop: LocalDesktop) -> AsyncIterator[LocalEnvironment]:
    async def keep(_: LocalEnvironment) -> None:
        return None

    environment = LocalEnvironment(osworld_desktop, server_environment(osworld_desktop), on_close=keep)
    yield environment
    await environment.close()


def _needs(app: str | None) -> None:
    if app is not None and shutil.which(app) is None:
        pytest.skip(f"needs {app} (AGENT_S3_OSWORLD_APPS=1 bash scripts/setup.sh)")


@pytest.mark.parametrize(("domain", "prefix", "app", "untouched", "failed"), SAMPLE, ids=[f"{d}-{p}" for d, p, *_ in SAMPLE])
async def test_a_real_task_sets_up_and_scores_untouched(
    env: LocalEnvironment, tmp_path: Path, domain: str, prefix: str, app: str | None, untouched: float,
    failed: float | None,
) -> None:
    _needs(app)
    task = _task(domain, prefix)
    check = await check_one(env, task, domain, tmp_path)
    assert check.outcome == "ok" and check.setup_ok and check.scorer_ok, check
    assert check.score == untouched, check
    if failed is not None:  # infeasible: OSWorld's FAIL is the answer that scores
        assert await env.score_task(task, tmp_path, last_action="fail") == failed


async def test_the_coding_agent_switches_on_do_not_disturb(env: LocalEnvironment, tmp_path: Path) -> None:
    """os f9be0997: the coding agent's bash, in the desktop's session, runs gsettings; the
    task's own getter (`gsettings get` through /execute) reads the change. Its code also sees
    and ends the desktop's processes (pkill), as code in the VM would."""
    task = _task("os", "f9be0997")
    await env.prepare_task(task, tmp_path)
    assert await env.score_task(task, tmp_path, last_action=None) == 0.0
    await env.act("import subprocess\nsubprocess.Popen(['xterm', '-T', 'victim'])")
    Script(
        "osworld-code",
        [
            Reply(text="<thoughts>Banners off.</thoughts>\n<answer>\n```bash\n"
                       "gsettings set org.gnome.desktop.notifications show-banners false\npkill -f 'xterm -T victim'\n"
                       "gsettings get org.gnome.desktop.notifications show-banners\n```\n</answer>"),
            Reply(text="<thoughts>It printed false.</thoughts><answer>DONE</answer>"),
            Reply(text="<summary>Do not disturb is on.</summary>\n<checklist>\n- banners are off\n</checklist>"),
        ],
    )  # fmt: skip
    sandbox = env.sandbox()
    assert sandbox is not None
    agent = CodeAgent(ChatModel.from_name("scripted/osworld-code"), CodeAgentConfig(budget=3))
    result = await agent.run(task.instruction, await env.screenshot(), sandbox)
    assert result.reason == "DONE" and result.steps[0].stdout.strip() == "false", result.steps[0]
    async with desktop_client(env.info) as client:
        windows = (await client.execute(["wmctrl", "-l"])).stdout
    assert "victim" not in windows, windows
    assert await env.score_task(task, tmp_path, last_action=None) == 1.0


async def test_sudo_in_gnome_terminal_renames_roots_folder(env: LocalEnvironment, tmp_path: Path) -> None:
    """os e0df059f: its setup makes the folder with `sudo -S mkdir`; the solution opens a
    terminal with Ctrl+Alt+T and renames it with sudo, all as GUI actions."""
    task = _task("os", "e0df059f")
    await env.prepare_task(task, tmp_path)
    async with desktop_client(env.info) as client:
        owner = (await client.execute(["stat", "-c", "%U", "/home/user/Desktop/todo_list_Jan_1"])).stdout.strip()
        assert owner == "root"  # the setup's sudo ran as the desktop's root
        assert (await env.act("pyautogui.hotkey('ctrl', 'alt', 't')")).ok
        for _ in range(80):
            if "Terminal" in (await client.execute(["wmctrl", "-l"])).stdout:
                break
            await asyncio.sleep(0.25)
        await asyncio.sleep(1.0)
        typed = "echo password | sudo -S mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2\n"
        assert (await env.act(f"pyautogui.write({typed!r}, interval=0.01)")).ok
        for _ in range(40):
            if (await client.execute(["test", "-d", "/home/user/Desktop/todo_list_Jan_2"])).returncode == 0:
                break
            await asyncio.sleep(0.25)
    assert await env.score_task(task, tmp_path, last_action=None) == 1.0


async def test_gimps_docks_hidden_in_its_window(env: LocalEnvironment, tmp_path: Path) -> None:
    """gimp d52d6308: Tab in GIMP's window hides its docks; the task's postconfig quits GIMP
    (ctrl+q), which writes sessionrc, which OSWorld's gimp_config_file getter reads."""
    _needs("gimp")
    task = _task("gimp", "d52d6308")
    await env.prepare_task(task, tmp_path)
    # The first look waited for GIMP: its window up, its splash gone, the screen still, not black.
    ready = env.last_readiness
    assert ready is not None and ready.ready and ready.seconds < CAP_S, ready
    shot = Image.open(io.BytesIO(await env.screenshot())).convert("L")
    assert sum(shot.histogram()[:24]) / (shot.width * shot.height) < 0.9, "the first look is black"
    async with desktop_client(env.info) as client:
        assert "gimp" in (await client.execute(["wmctrl", "-lx"])).stdout.lower()
    assert (await env.act("pyautogui.click(960, 600)")).ok
    await asyncio.sleep(0.5)
    assert (await env.act("pyautogui.press('tab')")).ok
    await asyncio.sleep(1.0)
    assert await env.score_task(task, tmp_path, last_action=None) == 1.0


#: The same sample through the command line (GIMP's task left to the environment-level test,
#: the slowest start here), with the task whose untouched state scores 1 here.
_CLI_SAMPLE = [(d, p, a) for d, p, a, *_ in SAMPLE if d != "gimp"] + [FLAGGED]
_AGENT = Path(sys.executable).with_name("agent-s3")


def _cli_examples(root: Path, tasks: list[tuple[str, str, str | None]]) -> dict[str, list[str]]:
    """The tasks whose apps are installed, copied as an examples folder; their ids by domain."""
    listed: dict[str, list[str]] = {}
    for domain, prefix, app in tasks:
        if app is not None and shutil.which(app) is None:
            continue
        source = next((OSWORLD_TASKS / "examples" / domain).glob(f"{prefix}*.json"))
        (root / domain).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / domain / source.name)
        listed.setdefault(domain, []).append(source.stem)
    return listed


@pytest.mark.timeout(600)
def test_the_sample_through_tasks_check_and_a_do_nothing_bench(tmp_path: Path) -> None:
    """`agent-s3 tasks check` sets each up and scores it untouched (0, the default-player task
    flagged at 1); `agent-s3 bench osworld --model scripted/noop` ends each at once and scores
    0 (no key, no model)."""
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("local desktops need root and bubblewrap")
    examples = tmp_path / "examples"
    listed = _cli_examples(examples, _CLI_SAMPLE)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), COLUMNS="250")
    checked = subprocess.run(
        [str(_AGENT), "tasks", "check", str(examples), "--json", "--parallel", "2", "--network", "off",
         "--out", str(tmp_path / "runs"), "--run-id", "check"],
        env=env, capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    by_id = {t["task_id"]: t for t in json.loads(checked.stdout)["tasks"]}
    flagged = next(t for t in by_id if t.startswith(FLAGGED[1]))
    for task_id, check in by_id.items():
        expected = ("flagged", 1.0) if task_id == flagged else ("ok", 0.0)
        assert (check["outcome"], check["score"]) == expected and check["setup_ok"] and check["scorer_ok"], check
    del listed[FLAGGED[0]][listed[FLAGGED[0]].index(flagged)]
    task_list = tmp_path / "test_sample.json"
    task_list.write_text(json.dumps({d: ids for d, ids in listed.items() if ids}))
    benched = subprocess.run(
        [str(_AGENT), "bench", "osworld", "--tasks", str(task_list), "--examples", str(examples), "--model",
         "scripted/noop", "--settle", "0.3", "--parallel", "2", "--network", "off", "--out", str(tmp_path / "runs"),
         "--run-id", "noop"],
        env=env, capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert benched.returncode == 0, benched.stdout[-2000:] + benched.stderr[-2000:]
    n = sum(len(ids) for ids in listed.values())
    assert f"tasks run {n}: scored {n}, errored 0" in benched.stdout
    for task_id in (t for ids in listed.values() for t in ids):
        assert f"{task_id} selected 0 score 0, pass@1 0.0" in benched.stdout
