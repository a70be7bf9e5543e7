"""Hostile model output on a real desktop, the policy's replies served over HTTP: replies
that try to run code on the host (Python in an action argument, `__import__`, shell
metacharacters in typed text, path traversal in file arguments, an enormous reply) never
execute on the host — a canary file outside the sandbox is untouched — and every refused
reply is recorded in the step with its reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_helpers import Figures, load_conftest

from core.llm import ScriptRequest
from runner.demo_policy import DEMO_PLANS, action_reply, role_of
from runner.tasks import resolve_task

pytestmark = [pytest.mark.chaos, pytest.mark.desktop, pytest.mark.integration]

_runner = load_conftest("runner", "runner_fixtures")
runner_desktop, local_env, harness = _runner.runner_desktop, _runner.local_env, _runner.harness


def _hostile(canary: Path) -> list[str]:
    touch = f"__import__('os').system('touch {canary}')"
    return [
        action_reply("I click.", f"agent.click({touch}, 1, 'left')"),
        action_reply("Setup.", touch),
        action_reply("I open it.", f"agent.open(open('{canary}', 'w').write('x'))"),
        action_reply("I run it.", f"exec(\"open('{canary}', 'w')\")"),
        action_reply("I open it.", f"agent.open('../../../../..{canary}')"),
        "x" * 2_000_000,
    ]


async def test_hostile_replies_never_reach_the_host(
        harness: object, local_env: object, tmp_path: Path, figures: Figures) -> None:
    canary = Path("/var/tmp") / f"chaos-canary-{os.getpid()}"
    canary.write_text("untouched")
    canary.chmod(0o600)  # the desktop's apps run as an unprivileged uid: not even readable there
    before = canary.stat().st_mtime_ns
    hostile = _hostile(canary)
    literal = [  # accepted actions whose arguments must stay data, inside the desktop
        action_reply("I type.", f"agent.type(text='; touch {canary} && $(touch {canary}) `touch {canary}` | sh')"),
    ]
    replies = iter([*hostile[:3], literal[0], *hostile[3:], action_reply("Done.", "agent.done()")])

    def respond(request: ScriptRequest) -> str:
        if role_of(request.messages) != "policy":  # reflection and grounding: the demo's answers
            return str(DEMO_PLANS["mousepad-append-line"](request))
        return next(replies)

    try:
        ran = await harness.run(resolve_task("mousepad-append-line"), local_env, respond,  # type: ignore[attr-defined]
                                config={"worker": {"max_format_retries": 5}})
        steps = ran.trajectory.steps
        touched = not canary.exists() or canary.stat().st_mtime_ns != before or canary.read_text() != "untouched"
    finally:
        canary.unlink(missing_ok=True)
    rejected = [reason for step in steps for reason in step.rejected]
    figures("hostile_replies_sent", len(hostile))
    figures("hostile_replies_rejected_with_reason", len(rejected))
    figures("literal_hostile_arguments_kept_as_data", len(literal))
    figures("host_executions", int(touched))
    figures("path_traversal_rejected", int(any("'..'" in reason for reason in rejected)))
    assert not touched
    assert len(rejected) == len(hostile) and all(reason.strip() for reason in rejected)
    assert any("'..'" in reason for reason in rejected)
    assert [s.action and s.action.get("kind") for s in steps] == ["type", "done"]
