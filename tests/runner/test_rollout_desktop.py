"""Single rollouts on a real desktop with the policy's replies over HTTP: solves by GUI and by
the coding agent, FAIL, the step budget, malformed replies, and the sandbox's walls."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from runner_helpers import HARNESS_MODELS

from core.llm import ScriptRequest
from core.protocols import Environment, ExecResult
from core.trajectory import Task
from environments.local import LocalEnvironment
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply, role_of
from runner.rollout import StepEvent
from runner.tasks import resolve_task

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def _fresh(plan: PlannedReplies) -> PlannedReplies:
    return PlannedReplies(plan=list(plan.plan), code=list(plan.code), summary=plan.summary)


async def test_gui_solve_scores_one_and_keeps_every_step(harness, local_env: LocalEnvironment) -> None:
    task = resolve_task("mousepad-append-line")
    landed: list[StepEvent] = []

    async def hook(event: StepEvent) -> None:
        landed.append(event)

    ran = await harness.run(task, local_env, _fresh(DEMO_PLANS[task.id]), hooks=[hook])

    assert ran.outcome.result.status == "done"
    assert ran.outcome.score == 1.0 and ran.result.selected_score == 1.0
    assert ran.layout.task(task.id).read_result() == ran.result
    traj = ran.trajectory
    assert traj.info.status == "done" and traj.info.score == 1.0 and traj.info.model == "openai/test-model"
    assert [s.action["kind"] for s in traj.steps] == ["click", "hotkey", "type", "hotkey", "done"]
    click = traj.steps[0]
    assert click.code and "pyautogui.click(960, 540" in click.code
    assert [(p.kind, p.x, p.y) for p in click.pointer] == [("click", 960, 540)]
    assert all(s.before_screenshot for s in traj.steps)
    assert all(s.after_screenshot for s in traj.steps[:-1]) and traj.steps[-1].after_screenshot is None
    assert traj.steps[1].reflection and traj.steps[1].reflection.startswith("ON-TRACK")
    assert all(s.error is None for s in traj.steps)
    # Every model call went over the wire with the key, and its ledger record is tagged.
    assert ran.server.requests and all(r.credential == "sk-runner-test-key" for r in ran.server.requests)
    records = ran.ledger.records
    assert len(records) == len(ran.server.requests)
    assert {r.tags["run"] for r in records} == {"run-1"}
    assert {r.tags["task"] for r in records} == {task.id} and {r.tags["rollout"] for r in records} == {"0"}
    call_ids = {cid for s in traj.steps for cid in s.call_ids}
    assert call_ids == {r.tags["call_id"] for r in records}
    assert {r.module for r in records} == {"policy", "grounding", "reflection"}
    # The hook saw each step as stored, with its screenshots.
    assert [e.step.index for e in sorted(landed, key=lambda e: e.step.index)] == [0, 1, 2, 3, 4]
    assert all(e.before.startswith(b"\x89PNG") for e in landed)
    assert ran.layout.rollout(task.id, 0).read_screenshot(traj.steps[0], "after") == next(
        e.after for e in landed if e.step.index == 0
    )


async def test_code_agent_solve_then_gui_verification(harness, local_env: LocalEnvironment) -> None:
    task = resolve_task("terminal-rename-extension")
    ran = await harness.run(task, local_env, _fresh(DEMO_PLANS[task.id]))

    assert ran.outcome.result.status == "done" and ran.outcome.score == 1.0
    steps = ran.trajectory.steps
    assert [s.action["kind"] for s in steps] == ["call_code_agent", "type", "done"]
    session = steps[0].code_agent
    assert session is not None and session["reason"] == "DONE" and session["steps_used"] == 2
    first = session["steps"][0]
    assert first["language"] == "bash" and first["returncode"] == 0
    assert first["stdout"].split() == ["beach.jpg", "dog.jpg", "notes.txt", "sunset.jpg"]
    assert steps[0].code is None and steps[0].after_screenshot
    assert set(session["call_ids"]) <= set(steps[0].call_ids)
    # The worker was handed the report before verifying on screen.
    step_two = [str(r.body["messages"][-1]["content"]) for r in ran.server.requests
                if "Step 2." in str(r.body["messages"][-1]["content"])]
    assert step_two and "Completion reason: DONE" in step_two[0] and "Renamed every .jpeg file" in step_two[0]
    assert "code_agent" in {r.module for r in ran.ledger.records}


async def test_fail_ends_failed_and_the_evaluator_scores_zero(harness, local_env: LocalEnvironment) -> None:
    task = resolve_task("mousepad-append-line")
    plan = PlannedReplies(plan=[action_reply("This cannot be done here.", "agent.fail()")])
    ran = await harness.run(task, local_env, plan)

    assert ran.outcome.result.status == "failed" and ran.outcome.result.last_action == "fail"
    assert ran.outcome.score == 0.0
    steps = ran.trajectory.steps
    assert len(steps) == 1 and steps[0].action == {"kind": "fail"} and steps[0].after_screenshot is None


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_step_budget_stops_the_rollout(harness, local_env: LocalEnvironment, protocol: str) -> None:
    task = resolve_task("Wait for the screen to change, then stop.")
    wait = action_reply("Nothing to do yet.", "agent.wait(0.1)")
    second_landed = asyncio.Event()
    first_saw_second: list[bool] = []

    async def slow_narrator(event: StepEvent) -> None:
        # Step 0's hook waits for step 1 to land: it can only finish if hooks run beside
        # the rollout rather than holding it up.
        if event.step.index == 0:
            await asyncio.wait_for(second_landed.wait(), timeout=30)
            first_saw_second.append(True)
        else:
            second_landed.set()

    ran = await harness.run(task, local_env, PlannedReplies(plan=[wait] * 5), config={"rollout": {"max_steps": 2}},
                            protocol=protocol, hooks=[slow_narrator])
    assert first_saw_second == [True], "hooks were awaited inside the loop, or not drained before the end"

    assert ran.outcome.result.status == "step_limit" and ran.outcome.result.steps == 2
    assert ran.outcome.score is None and ran.result.scores == {0: None}
    assert [s.action["kind"] for s in ran.trajectory.steps] == ["wait", "wait"]
    assert ran.trajectory.info.reason == "no outcome within 2 steps"
    assert ran.trajectory.info.model == HARNESS_MODELS[protocol]
    assert ran.server.requests and ran.server.requests[0].path.endswith(
        "/v1/messages" if protocol == "anthropic" else "/v1/chat/completions"
    )


async def test_cost_limit_stops_the_rollout(harness, local_env: LocalEnvironment) -> None:
    task = resolve_task("Wait for the screen to change, then stop.")
    wait = action_reply("Nothing to do yet.", "agent.wait(0.1)")
    ran = await harness.run(
        task, local_env, PlannedReplies(plan=[wait] * 10),
        config={"policy": {"model": "openai/gpt-4o"}, "rollout": {"cost_limit": 0.012, "max_steps": 10}},
    )  # fmt: skip
    result = ran.outcome.result
    per_step = [r.dollars for r in ran.ledger.records]
    assert result.status == "cost_limit" and all(d > 0 for d in per_step)
    assert sum(per_step) >= 0.012 and sum(per_step[:-2]) < 0.012, "it stopped at the first step over the limit"
    assert result.steps == len(ran.trajectory.steps) < 10
    assert "over the limit of $0.0120" in ran.trajectory.info.reason


class CountingEnv(Environment):
    """The real environment, counting what it is asked to execute."""

    def __init__(self, inner: LocalEnvironment) -> None:
        self.inner, self.name, self.platform = inner, inner.name, inner.platform
        self.acted: list[str] = []
        self.info = inner.info

    async def screenshot(self) -> bytes:
        return await self.inner.screenshot()

    async def screen_size(self) -> tuple[int, int]:
        return await self.inner.screen_size()

    async def cursor_position(self) -> tuple[int, int]:
        return await self.inner.cursor_position()

    async def act(self, code: str) -> ExecResult:
        self.acted.append(code)
        return await self.inner.act(code)

    def sandbox(self):  # type: ignore[no-untyped-def]
        return self.inner.sandbox()

    async def revert(self) -> None:
        await self.inner.revert()

    async def close(self) -> None:
        await self.inner.close()


async def test_malformed_replies_are_rejected_never_run_and_end_in_format_error(
    harness, local_env: LocalEnvironment, tmp_path: Path
) -> None:
    canary = Path("/tmp") / f"agent-s3-canary-{uuid.uuid4().hex}"
    replies = [
        "I think the best thing is to click the Save button now.",
        "```python\nagent.hotkey(['ctrl', 'end'])\n```\n```python\nagent.done()\n```",
        "```python\nagent.launch_rockets(3)\n```",
        "```python\nagent.click('the editor', 7, 'sideways')\n```",
        f"```python\nagent.type(text=__import__('os').system('touch {canary}'))\n```",
        f"```python\n__import__('os').system('touch {canary}')\n```",
    ]
    asked: list[str] = []

    def responder(request: ScriptRequest) -> str:
        if role_of(request.messages) != "policy":
            return "ON-TRACK"
        asked.append(request.messages[-1].text())
        return replies[len(asked) - 1]

    env = CountingEnv(local_env)
    task = resolve_task("Type hello into the editor.")
    ran = await harness.run(task, env, responder, config={"worker": {"max_format_retries": 5}})

    assert ran.outcome.result.status == "format_error"
    assert len(asked) == 6, "every malformed reply is answered with a re-ask, up to the bound"
    feedback = asked[1:]
    assert "No code block found" in feedback[0]
    assert "Found 2 code blocks" in feedback[1]
    assert "agent.launch_rockets is not an available action" in feedback[2]
    assert "Invalid arguments for agent.click" in feedback[3]
    assert "Argument 'text'" in feedback[4] and "a function call is not allowed" in feedback[4]
    assert env.acted == [], "nothing from a malformed reply reached the desktop"
    assert not canary.exists()
    step = ran.trajectory.steps[0]
    assert step.action is None and step.code is None and step.after_screenshot is None
    assert step.error and "6 replies" in step.error and "Only methods of `agent`" in step.error
    assert len(step.call_ids) == 6


def _host_files(canary: Path) -> tuple[str, bool]:
    return canary.read_text(), Path("/etc/agent-s3-owned").exists()


async def test_code_agent_cannot_touch_the_host(harness, local_env: LocalEnvironment) -> None:
    canary = Path("/var/tmp") / f"agent-s3-host-canary-{uuid.uuid4().hex}"
    canary.write_text("original")
    try:
        tries = [
            f"<answer>\n```bash\necho tampered > {canary}; rm -f {canary}; cat {canary}; touch /etc/agent-s3-owned\n```\n</answer>",
            f"<answer>\n```python\nopen({str(canary)!r}, 'w').write('tampered')\n```\n</answer>",
            "<answer>\nFAIL\n</answer>",
        ]
        plan = PlannedReplies(
            plan=[action_reply("Code does this.", "agent.call_code_agent('overwrite the canary file')"),
                  action_reply("It could not.", "agent.fail()")],
            code=tries,
        )
        ran = await harness.run(resolve_task("Overwrite the canary file on the host."), local_env, plan)
        assert _host_files(canary) == ("original", False)
        session = ran.trajectory.steps[0].code_agent
        assert session is not None and session["reason"] == "FAIL"
        assert [s["returncode"] != 0 for s in session["steps"][:2]] == [True, True]
    finally:
        canary.unlink(missing_ok=True)


def test_free_text_task_has_no_evaluator() -> None:
    task: Task = resolve_task("Open the text editor and write a haiku.")
    assert task.id.startswith("instruction-") and task.evaluator is None and task.snapshot == "blank"
