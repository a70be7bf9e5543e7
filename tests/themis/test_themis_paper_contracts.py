"""The paper's critic by default: its reply contracts end to end, uncertain verdicts and
verifier suggestions reaching the selector, the judge's failure window; the condensed
prompts only when asked for."""

from __future__ import annotations

from pathlib import Path

from critic_fixtures import NOT_QA, PAPER_NOT_QA, Roles, asked_step, build_rollout, js, user_text

from core.llm import ScriptRequest
from themis import ThemisRecord, make_critic, summarize


def paper_verify(request: ScriptRequest) -> str:
    step = asked_step(request)
    verdict = "uncertain" if step == 1 else "success"
    return js(verified_steps=[{"step_index": step, "assessment_goal": "g", "verdict": verdict,
                               "evidence": [f"AFTER of step {step}"],
                               "notes": "the dialog hides the cell" if verdict == "uncertain" else ""}],
              selector_feedback={"need_additional_checks": verdict == "uncertain", "reasoning": "r",
                                 "suggested_goals": [{"proposed_goal": "the saved file's name shows in the title bar",
                                                      "why": "the task requires saving"}]},
              overall_summary="s")


async def test_the_paper_contracts_run_end_to_end(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=3)
    initial = js(key_steps=[{"step_index": 0, "assessment_goal": "editor shows hello", "why_important": "content"},
                            {"step_index": 1, "assessment_goal": "save dialog shows notes.txt", "why_important": "name"}],
                 rationale="content and name")
    follow = js(need_more_steps=True, key_steps=[{"step_index": 2, "assessment_goal": "title reads notes.txt",
                                                  "why_important": "resolves the uncertain save"}],
                reason_to_continue="step 1 is uncertain")
    issues = js(issues=[{"id": "ISS-1", "summary": "Reminder: the save is shown at step 2", "risk": "Warning",
                         "related_steps": [2], "evidence_needed": "title bar", "notes": None}],
                overall_commentary="Nothing blocks.")
    judge = js(qa_answer_review={"is_qa_task": False, "last_agent_answer": "", "compliance_verdict": "not_applicable",
                                 "notes": ""},
               critical_evidence=[{"step_index": 0, "verdict": "success", "cue": "hello"},
                                  {"step_index": 2, "verdict": "success", "cue": "title"}],
               failure_window={"start_step": -1, "end_step": -1, "reason": ""}, missing_conditions=None,
               justification="Steps 0 and 2 prove it.", final_decision="Completed")
    roles = Roles({"selector_initial": [initial], "selector_followup": [follow], "verifier": paper_verify,
                   "reviewer": [issues], "judge": [judge]})
    # After step 2 no selectable step is left, so the pass ends without another selector call.
    model, script = roles.model(1 + 2 + 1 + 1 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 1 and verdict.options["prompts"] == "paper"
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert [(c.milestone.step, c.verdict) for c in record.checks()] == [(0, "success"), (1, "uncertain"), (2, "success")]
    assert record.reviews[0].sound and record.reviews[0].concerns[0].severity == "warning"
    assert record.judge is not None and record.judge.key_steps == [0, 2]
    assert record.judge.failure_window is not None and record.judge.failure_window.start == -1
    # The system prompts are the paper's contracts.
    for role, field in (("selector_initial", "key_steps"), ("selector_followup", "need_more_steps"),
                        ("verifier", "verified_steps"), ("reviewer", "evidence_needed"), ("judge", "failure_window")):
        assert field in roles.seen[role][0].messages[0].text(), role
    assert "err on the side of more steps" in user_text(roles.seen["selector_initial"][0])
    # The uncertain verdict, its notes and the verifier's suggestions reach the follow-up selector.
    followup = user_text(roles.seen["selector_followup"][0])
    assert "verdict: uncertain" in followup and "the dialog hides the cell" in followup
    assert "verifier suggests checking: the saved file's name shows in the title bar" in followup


async def test_the_judge_must_give_a_failure_window_when_not_completed(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1)
    no_window = js(qa_answer_review=PAPER_NOT_QA, final_decision="not_completed", justification="Step 0 shows no change.")
    window = js(qa_answer_review=PAPER_NOT_QA, final_decision="not completed", justification="Step 0 shows no change.",
                failure_window={"start_step": 1, "reason": "the agent stopped without saving"})
    roles = Roles({"selector_initial": [js(key_steps=[{"step_index": 0, "assessment_goal": "g", "why_important": "w"}],
                                           rationale="r")],
                   "verifier": paper_verify, "reviewer": [js(issues=None, overall_commentary="none")],
                   "judge": [no_window, window]})
    model, script = roles.model(5)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 0
    assert "failure_window" in user_text(roles.seen["judge"][1])
    record = verdict.record
    assert isinstance(record, ThemisRecord) and record.judge is not None
    assert record.judge.failure_window is not None and (record.judge.failure_window.start, record.judge.failure_window.end) == (1, 1)
    assert " failure begins at step 1: the agent stopped without saving" in summarize(verdict)


async def test_the_condensed_prompts_are_a_named_option(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1)
    roles = Roles({"selector_initial": [js(milestones=[{"step": 0, "goal": "g", "why": "w"}], done=True, reason="r")],
                   "verifier": lambda r: js(step=asked_step(r), verdict=1, evidence=["e"]),
                   "reviewer": [js(sound=True, concerns=[], summary="ok")],
                   "judge": [js(qa=NOT_QA, decision="not_completed", reason="no window needed here")]})
    model, script = roles.model(4)
    verdict = await make_critic("themis", model, prompts="condensed")(task, rd)
    script.assert_done()
    assert verdict.reward == 0 and verdict.options["prompts"] == "condensed"
    assert '"milestones"' in roles.seen["selector_initial"][0].messages[0].text()
    assert "key_steps" not in roles.seen["selector_initial"][0].messages[0].text()
