"""Android in the runner, end to end: three simulated emulators behind a local adb server,
driven through the real `adbutils` client by the runner's own pool, task setup, worker and
evaluator. Every model answers over HTTP from the local OpenAI protocol server: three
policies diverge on an Android-suite task (one solves it), the narrator states what the
actions typed, and the Behavior Judge picks the solver. A single rollout runs through the
``agent-s3 run --env android`` command as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from contract_replies import structured
from core.images import MARKER_COLOURS, decode_png
from core.llm import ImagePart, Ledger, Script, ScriptRequest
from core.trajectory import RunLayout, Task, TaskResult
from runner.config import load_run_config
from runner.demo_policy import PlannedReplies, action_reply
from runner.environments import open_pool
from runner.models import build_models
from runner.report import write_report
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.android import FakeFleet, fake_fleet
from testing.llm import OpenAIServer

pytestmark = pytest.mark.integration

KEY = "sk-android-runner-key"
CLI = Path(sys.executable).with_name("agent-s3")
TASK = "notes-save-shopping-item"
SCREEN = (540, 960)
#: Centres of the simulated launcher's Notes icon and of the Notes app's text field.
NOTES_ICON = (103, 211)
NOTE_FIELD = (270, 173)
_STEP = re.compile(r"^Step (\d+)\.$", re.MULTILINE)


class PhoneReplies(PlannedReplies):
    """`PlannedReplies` for the phone's prompt (its policy prompt names a phone)."""

    def __call__(self, request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        if system.startswith("You operate an Android phone"):
            self.seen.append("policy")
            steps = _STEP.findall("\n".join(m.text() for m in request.messages))
            n = int(steps[-1]) if steps else 1
            return self.plan[n - 1] if n <= len(self.plan) else action_reply("No plan left.", "agent.fail()")
        return super().__call__(request)


def _note_plan(text: str) -> PhoneReplies:
    return PhoneReplies(
        plan=[
            action_reply("The home screen shows the Notes icon.", 'agent.click("the Notes app icon")'),
            action_reply(
                "Notes is open; I write the note and press enter to save it.",
                f"agent.type(element_description='the note text field', text={text!r}, enter=True)",
            ),
            action_reply("The note is listed.", "agent.done()"),
        ],
        points={"the Notes app icon": NOTES_ICON, "the note text field": NOTE_FIELD},
    )


def _gives_up() -> PhoneReplies:
    return PhoneReplies(plan=[action_reply("I cannot find a notes app.", "agent.fail()")])


def narrator_and_judge(judge_prompts: list[str], narrations: list[ScriptRequest]) -> object:
    """The narrator states what the action text typed; the judge picks the candidate whose
    facts show 'buy oat milk' saved."""

    def reply(request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        text = "\n".join(m.text() for m in request.messages if m.role != "system")
        if system.startswith("You describe what a single computer action"):
            narrations.append(request)
            typed = re.search(r'"text": "([^"]+)"', text)
            fact = f"A note '{typed.group(1)}' was saved in Notes" if typed else "The Notes app opened"
            return f"<thoughts>Compared the screens.</thoughts>\n<facts>\n- {fact}\n</facts>"
        judge_prompts.append(text)
        sections = re.split(r"===== Candidate (\d+) =====", text)
        for number, body in zip(sections[1::2], sections[2::2], strict=True):
            if "'buy oat milk' was saved" in body:
                return f"<thoughts>Candidate {number} saved the asked note.</thoughts>\n<answer>{number}</answer>"
        return "<thoughts>None solves it.</thoughts>\n<answer>1</answer>"

    return structured(reply)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[FakeFleet]:
    with fake_fleet(3, tmp_path, screen=SCREEN) as started:
        yield started


def _environment(fleet: FakeFleet) -> dict[str, object]:
    return {"kind": "android", "adb_port": fleet.server.port, "console_token": str(fleet.token_path)}


@dataclass
class WideRun:
    strategy: WideScaling
    result: TaskResult
    layout: RunLayout
    ledger: Ledger
    task: Task
    judge_prompts: list[str]
    narrations: list[ScriptRequest]


async def _run_wide(root: Path, fleet: FakeFleet) -> WideRun:
    plans = {"soy": _note_plan("buy soy milk"), "solver": _note_plan("buy oat milk"), "gives-up": _gives_up()}
    judge_prompts: list[str] = []
    narrations: list[ScriptRequest] = []
    task = resolve_task(TASK)
    async with AsyncExitStack() as stack:
        urls = {}
        for name, plan in plans.items():
            server = OpenAIServer(Script(f"android-{name}", [plan] * 100), api_key=KEY)
            urls[name] = (await stack.enter_async_context(server)).base_url
        judge = await stack.enter_async_context(
            OpenAIServer(
                Script("android-judge", [narrator_and_judge(judge_prompts, narrations)] * 100), api_key=KEY
            )
        )
        mixture = [{"model": f"openai/{name}", "base_url": url, "api_key": KEY} for name, url in urls.items()]
        cfg = load_run_config([{
            "policy": {"model": mixture[0]["model"], "base_url": mixture[0]["base_url"], "api_key": KEY},
            "environment": _environment(fleet),
            "rollout": {"settle_seconds": 0.05},
            "strategy": "wide",
            "wide": {"mixture": mixture, "seed": 11, "judge": "bjudge",
                     "judge_model": {"model": "openai/judge", "base_url": judge.base_url, "api_key": KEY}},
        }])  # fmt: skip
        layout = RunLayout(root / "runs", "android-wide", durable=False)
        layout.path.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        try:
            async with open_pool(cfg.environment, size=3) as pool:
                run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger)
                result = await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()
    await asyncio.to_thread(write_report, layout)
    return WideRun(strategy, result, layout, ledger, task, judge_prompts, narrations)


def _red_near(png: bytes, x: float, y: float, radius: int = 30) -> int:
    """Pixels of the click marker's colour within `radius` of (x, y)."""
    img = decode_png(png).convert("RGB")
    want = MARKER_COLOURS["click"]
    count = 0
    for px in range(max(0, round(x) - radius), min(img.width, round(x) + radius)):
        for py in range(max(0, round(y) - radius), min(img.height, round(y) + radius)):
            if img.getpixel((px, py)) == want:
                count += 1
    return count


async def test_wide_run_on_three_phones_judges_the_solver(fleet: FakeFleet, tmp_path: Path) -> None:
    ran = await _run_wide(tmp_path, fleet)
    task_dir = ran.layout.task(ran.task.id)
    outcomes = ran.strategy.outcomes[ran.task.id]
    assert [o.result.status for o in outcomes] == ["done", "done", "failed"]
    # Scored by the task's adb shell check on each phone: only the solver's note matches.
    assert [o.score for o in outcomes] == [0.0, 1.0, 0.0]
    assert sorted(d.state.notes[0] for d in fleet.devices if d.state.notes) == [
        "buy oat milk",
        "buy soy milk",
    ]
    # Each rollout ran on its own phone, in the task's budget (10 x complexity 1.2).
    headers = task_dir.headers()
    assert {headers[k].environment for k in range(3)} == {f"android-{s}" for s in fleet.serials}
    assert ran.task.platform == "android" and ran.task.max_steps == 12
    assert all("avd snapshot load agent_s3_start" in c.commands for c in fleet.consoles)
    # The phone's actions reached the devices as adb input commands.
    solver = next(d for d in fleet.devices if d.state.notes == ["buy oat milk"])
    assert ("tap", NOTES_ICON) in solver.events and ("text", ("buy oat milk",)) in solver.events
    steps = list(task_dir.rollout(1).iter_steps())
    assert json.loads(steps[0].code or "") == [{"op": "tap", "x": NOTES_ICON[0], "y": NOTES_ICON[1]}]
    # Narratives for all three; the narrator saw tap markers on the phone's screenshots.
    for k, n_steps in ((0, 3), (1, 3), (2, 1)):
        narrative = task_dir.read_narrative(k)
        assert narrative is not None and len(narrative.facts) == n_steps
    assert any("'buy oat milk' was saved" in f for f in task_dir.read_narrative(1).facts[1])  # type: ignore[union-attr]
    taps = [r for r in ran.narrations if f"click at {NOTES_ICON}" in "\n".join(m.text() for m in r.messages)]
    assert taps  # the two identical taps may share one cached narration
    first_image = next(p for m in taps[0].messages for p in m.parts() if isinstance(p, ImagePart))
    shown = decode_png(first_image.data).width / SCREEN[0]  # the narrator sees a downscaled copy
    assert _red_near(first_image.data, NOTES_ICON[0] * shown, NOTES_ICON[1] * shown) > 20
    raw = task_dir.rollout(1).read_screenshot(steps[0], "before")
    assert _red_near(raw, *NOTES_ICON) == 0  # the phone's own screenshot stays unmarked
    # One judge call over the three candidates; it picked the solver.
    assert len(ran.judge_prompts) == 1
    selection = task_dir.read_selection()
    assert selection is not None and selection.chosen == 1 and sorted(selection.candidates) == [0, 1, 2]
    result = task_dir.read_result()
    assert result == ran.result and result.selected == 1 and result.selected_score == 1.0
    assert {"policy", "narrative", "judge"} <= {r.module for r in ran.ledger.records}
    # The report shows the run with the narrator's marked pictures of the taps.
    html = ran.layout.report_path.read_text()
    assert html.count('class="rollout chosen" id="rollout-1"') == 1
    marked = task_dir.path / "augmented" / "rollout-1" / "step-000-before.png"
    scale = decode_png(marked.read_bytes()).width / SCREEN[0]
    assert _red_near(marked.read_bytes(), NOTES_ICON[0] * scale, NOTES_ICON[1] * scale) > 20


async def test_cli_runs_one_android_rollout(fleet: FakeFleet, tmp_path: Path) -> None:
    plan = _note_plan("buy oat milk")
    async with OpenAIServer(Script("android-cli", [plan] * 100), api_key=KEY) as server:
        env = {**os.environ, "COLUMNS": "200"}
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", TASK, "--env", "android",
            "--adb-host", "127.0.0.1", "--adb-port", str(fleet.server.port),
            "--model", "openai/test-model", "--base-url", server.base_url,
            "-c", f"policy.api_key={KEY}", "-c", f"environment.console_token={fleet.token_path}",
            "--out", str(tmp_path / "runs"), "--run-id", "cli-android",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    text = out.decode() + err.decode()
    assert proc.returncode == 0, text
    assert "outcome done after 3 steps" in text and "score 1 " in text
    assert f"adb server at 127.0.0.1:{fleet.server.port}" in text
    layout = RunLayout(tmp_path / "runs", "cli-android")
    result = layout.task(TASK).read_result()
    assert result is not None and result.scores == {0: 1.0}
    config = json.loads((layout.path / "config.json").read_text())
    assert config["worker"]["platform"] == "android" and config["rollout"]["settle_seconds"] == 1.0
    assert config["worker"]["code_agent"] is False
    assert KEY not in (layout.path / "config.json").read_text()
    assert sum(d.state.notes == ["buy oat milk"] for d in fleet.devices) == 1


async def test_cli_refuses_a_desktop_task_on_a_phone(fleet: FakeFleet, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), "run", "--task", "mousepad-append-line", "--env", "android",
        "--adb-port", str(fleet.server.port), "--model", "openai/test-model", "--out", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "is for ubuntu, and --env android runs android tasks" in lines[0]
