"""The three critics on a trajectory recorded from a real Xvfb desktop: an xterm driven by
xdotool, each screen captured with mss and stored through the run layout, exactly as a
rollout stores it. Model replies are scripted; everything else is real."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import mss
import mss.tools
import pytest
from critic_fixtures import NOT_QA, Roles, asked_step, images_of, js, user_text

from core.trajectory import RolloutDir, RolloutInfo, RunLayout, Step, Task
from themis import LastKRecord, SequentialRecord, ThemisRecord, make_critic

pytestmark = [
    pytest.mark.desktop,
    pytest.mark.skipif(not all(shutil.which(b) for b in ("Xvfb", "xterm", "xdotool")),
                       reason="needs Xvfb, xterm and xdotool"),
]

INSTRUCTION = "In the terminal, create a file named done.txt in the home folder."


class Screen:
    def __init__(self, display: str, env: dict[str, str]) -> None:
        self.display = display
        self.env = env

    def grab(self) -> bytes:
        with mss.MSS(display=self.display) as grabber:
            shot = grabber.grab(grabber.monitors[1])
            return mss.tools.to_png(shot.rgb, shot.size) or b""

    def act(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=15, capture_output=True)
        time.sleep(0.4)  # let xterm draw


@pytest.fixture(scope="module")
def desktop_rollout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Task, RolloutDir, Path]]:
    """Records: type the command, press Enter, list the folder, done."""
    home = tmp_path_factory.mktemp("home")
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            pass_fds=[write_fd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        display = ":" + pipe.readline().decode().strip()
    env = {**os.environ, "DISPLAY": display, "HOME": str(home)}
    term = subprocess.Popen(["xterm", "-geometry", "100x30+0+0"], env=env, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        screen = Screen(display, env)
        screen.act("search", "--sync", "--onlyvisible", "--class", "xterm")
        layout = RunLayout(tmp_path_factory.mktemp("runs"), "desk", durable=False)
        task = Task(id="make-file", instruction=INSTRUCTION)
        layout.task(task.id).write_task(task)
        rd = layout.rollout(task.id, 0)
        rd.start(RolloutInfo(run_id="desk", task_id=task.id, rollout=0, model="scripted/policy",
                             started_at=time.time()))
        actions: list[tuple[dict[str, object], tuple[str, ...]]] = [
            ({"kind": "type", "text": "touch done.txt"}, ("type", "--delay", "5", "touch done.txt")),
            ({"kind": "hotkey", "keys": ["enter"]}, ("key", "Return")),
            ({"kind": "type", "text": "ls\n"}, ("type", "--delay", "5", "ls\n")),
        ]
        before = screen.grab()
        for i, (action, command) in enumerate(actions):
            screen.act(*command)
            after = screen.grab()
            rd.append_step(Step(index=i, thought=f"step {i}", action=action), {"before": before, "after": after})
            before = after
        rd.append_step(Step(index=3, thought="done.txt is listed.", action={"kind": "done"}), {"before": before})
        rd.finish("done")
        assert (home / "done.txt").exists()
        yield task, rd, home
    finally:
        for proc in (term, xvfb):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_themis_on_a_desktop_trajectory(desktop_rollout: tuple[Task, RolloutDir, Path]) -> None:
    task, rd, _ = desktop_rollout
    roles = Roles({
        "selector_initial": [js(milestones=[{"step": 1, "goal": "the prompt returns without an error",
                                             "why": "the file is created"},
                                            {"step": 2, "goal": "ls lists done.txt", "why": "proof"}],
                                done=True, reason="creation and listing")],
        "verifier": lambda r: js(step=asked_step(r), verdict=1, evidence=["AFTER shows it"]),
        "reviewer": [js(concerns=[], sound=True, summary="ok")],
        "judge": [js(qa=NOT_QA, decision="completed", reason="Step 2 lists done.txt.", key_steps=[2])],
    })
    model, script = roles.model(5)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 1
    assert isinstance(verdict.record, ThemisRecord)
    for request in roles.seen["verifier"]:
        step = rd.read_step(asked_step(request))
        # 1024x768 screens are under the 1280 cap: they go out exactly as captured.
        assert [i.data for i in images_of(request)] == [rd.read_screenshot(step, "before"),
                                                        rd.read_screenshot(step, "after")]
    assert "type({\"text\": \"touch done.txt\"})" in user_text(roles.seen["selector_initial"][0])


async def test_baselines_on_a_desktop_trajectory(desktop_rollout: tuple[Task, RolloutDir, Path]) -> None:
    task, rd, _ = desktop_rollout
    roles = Roles({"lastk": [js(reason="ls shows done.txt", score=1)]})
    model, script = roles.model(1, name="lastk")
    verdict = await make_critic("lastk", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 1 and isinstance(verdict.record, LastKRecord)
    assert verdict.record.frames == ["the screen after step 1", "the screen after step 2"]

    # Each real screen differs from the last (typing, a new prompt line, a listing): no skip.
    seq = Roles({"sequential": lambda r: js(reason="?", satisfied="after step 2" in user_text(r))})
    model, script = seq.model(3, name="seq")
    verdict = await make_critic("sequential", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 1 and isinstance(verdict.record, SequentialRecord)
    assert [c.skipped for c in verdict.record.checks] == [False, False, False]
