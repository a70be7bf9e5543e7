"""Critic options from the command line reach the critic: a model per role is built from
``--option models.<role>=...`` and its calls go to that model."""

from __future__ import annotations

import json
from pathlib import Path

from critic_fixtures import PAPER_NOT_QA, RUN_ID, Roles, asked_step, build_rollout, js
from typer.testing import CliRunner

from core.llm import Script
from runner.cli import app


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_command_line_builds_a_model_per_role(runs: Path) -> None:
    build_rollout(runs, actions=1)
    roles = Roles({"selector_initial": [js(key_steps=[{"step_index": 0, "assessment_goal": "g", "why_important": "w"}],
                                           rationale="r")],
                   "verifier": lambda r: js(step=asked_step(r), verdict="success", evidence=["AFTER"]),
                   "reviewer": [js(issues=None, overall_commentary="none")],
                   "judge": [js(qa_answer_review=PAPER_NOT_QA, final_decision="completed", justification="Step 0 shows it.")]})
    main = Script("cli-main", [roles] * 3)
    judge = Script("cli-judge", [roles])
    code, out, err = _invoke("critic", str(runs / RUN_ID), "--critic", "themis", "--model", "scripted/cli-main",
                             "--option", "models.judge=scripted/cli-judge", "--option", "reviewer_rounds=1")
    assert code == 0, err
    assert "themis: accepted 1 of 1" in out
    main.assert_done()
    judge.assert_done()  # the judge's one call went to its own model
    saved = json.loads((runs / RUN_ID / "task-a" / "rollout-0" / "critic-themis.json").read_text())
    assert saved["options"]["models"] == {"judge": "scripted/cli-judge"} and saved["reward"] == 1
