"""The OS-Themis critic on real rollout folders with scripted role replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from critic_fixtures import NOT_QA, Roles, asked_step, build_rollout, images_of, js, png, user_text

from core.llm import ChatModel, Ledger, Reply, Script, ScriptRequest
from core.trajectory import RolloutDir
from themis import ThemisRecord, grade_rollout, load_verdict, make_critic, summarize

#: Where failure begins: the paper's judge contract asks for it with every decision but "completed".
WINDOW = {"start_step": 0, "end_step": 0, "reason": "the first step already shows the problem"}


def verify_ok(request: ScriptRequest) -> str:
    return js(step=asked_step(request), verdict=1, evidence=["AFTER shows the change"])


SOUND = js(sound=True, concerns=[], summary="Every requirement is checked.")
COMPLETED = js(qa=NOT_QA, decision="completed", reason="Step 0 shows the text typed and saved.", key_steps=[0])
STOP = js(milestones=[], done=True, reason="The saved file is verified.")


def pick(*steps: int, done: bool = False) -> str:
    return js(milestones=[{"step": s, "goal": f"after step {s} the change is visible", "why": "needed"}
                          for s in steps], done=done, reason="these decide the task")


async def test_full_deliberation_accepts_and_saves_beside_the_trajectory(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=3)
    roles = Roles({"selector_initial": [pick(0, 2)], "selector_followup": [STOP], "verifier": verify_ok,
                   "reviewer": [SOUND], "judge": [COMPLETED]})
    ledger = Ledger()
    model, script = roles.model(6, ledger)
    critic = make_critic("themis", model)

    verdict = await grade_rollout(critic, task, rd, durable=False)

    script.assert_done()
    assert verdict.reward == 1 and verdict.calls == 6 and verdict.error is None
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert [c.milestone.step for c in record.checks()] == [0, 2]
    assert [c.verdict for c in record.checks()] == ["success", "success"]
    assert record.passes[0].stopped == "selector" and len(record.reviews) == 1
    # Each verification saw that step's before and after screens, in that order.
    for request in roles.seen["verifier"]:
        step = asked_step(request)
        images = images_of(request)
        assert [i.data for i in images] == [rd.read_screenshot(rd.read_step(step), "before"),
                                            rd.read_screenshot(rd.read_step(step), "after")]
    # The selector saw the history with the terminating step marked, and the end screens.
    first = user_text(roles.seen["selector_initial"][0])
    assert "Step 3 [terminating step" in first and "Selectable steps (they have before and after screens): 0, 1, 2" in first
    assert len(images_of(roles.seen["selector_initial"][0])) == 2
    # Every call is in the ledger under module critic, with its role.
    assert {r.module for r in ledger.records} == {"critic"}
    assert sorted(r.tags["role"] for r in ledger.records) == sorted(
        ["selector", "selector", "verifier", "verifier", "reviewer", "judge"])
    # The deliberation is on disk beside traj.jsonl and reads back whole.
    saved = load_verdict(rd.path, "themis")
    assert saved is not None and saved == verdict
    assert json.loads((rd.path / "critic-themis.json").read_text())["record"]["kind"] == "themis"


async def test_a_selector_that_never_stops_is_cut_at_six_rounds(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=10)
    counter = iter(range(10))

    def one_new_step(request: ScriptRequest) -> str:
        return pick(next(counter))

    roles = Roles({"selector": one_new_step, "verifier": verify_ok, "reviewer": [SOUND], "judge": [COMPLETED]})
    model, script = roles.model(6 + 6 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    assert roles.count("selector") == 6 and roles.count("verifier") == 6
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert record.passes[0].stopped == "cap" and len(record.passes[0].rounds) == 6
    assert [r.prompt for r in record.passes[0].rounds] == ["initial"] + ["follow_up"] * 5


async def test_the_pass_ends_when_no_selectable_step_is_left(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=2)
    roles = Roles({"selector_initial": [pick(0)], "selector_followup": [pick(1)], "verifier": verify_ok,
                   "reviewer": [SOUND], "judge": [COMPLETED]})
    model, script = roles.model(2 + 2 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert isinstance(verdict.record, ThemisRecord) and verdict.record.passes[0].stopped == "exhausted"


def concern(step: int, query: str) -> dict[str, object]:
    return {"kind": "uncaptured_failure", "issue": f"step {step} may have undone the save",
            "evidence": f"the action at step {step} clicks Revert", "steps": [step], "query": query,
            "severity": "blocker"}


async def test_the_reviewer_loop_stops_at_two_rounds(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=4)
    unsound = js(sound=False, concerns=[concern(1, "Is the file still saved after step 1?")], summary="doubt")
    roles = Roles({"selector_initial": [pick(0, done=True)], "selector_followup": stop_handler,
                   "verifier": verify_ok, "reviewer": lambda r: unsound,
                   "judge": [js(qa=NOT_QA, decision="uncertain", failure_window=WINDOW, reason="The revert at step 1 was never ruled out.")]})
    # pass 0: 1 selector + 1 verifier; each of 2 reviews: 1 reviewer + 1 selector + 1 re-check.
    model, script = roles.model(2 + 2 * 3 + 1)
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    assert roles.count("reviewer") == 2
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert [r.round for r in record.reviews] == [1, 2] and len(record.passes) == 3
    assert verdict.reward == 0  # uncertain is not completed
    judge_prompt = user_text(roles.seen["judge"][0])
    assert "Review round 2: concerns raised" in judge_prompt and "Pass answering review round 2" in judge_prompt


def stop_handler(request: ScriptRequest) -> str:
    return STOP


async def test_a_concern_sends_selector_and_verifier_back_to_the_cited_steps(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=4)
    query = "Does the title bar after step 2 still show notes.txt without an asterisk?"
    reviews = [js(sound=False, concerns=[concern(2, query)], summary="step 2 is doubtful"), SOUND]

    def revision(request: ScriptRequest) -> str:
        # The revision prompt carries the concern; this selector adds step 3 and leaves 2 out.
        assert query in user_text(request)
        return js(milestones=[{"step": 3, "goal": "the file list shows notes.txt", "why": "persistence"}],
                  done=True, reason="step 3 settles persistence")

    def verifier(request: ScriptRequest) -> str:
        step = asked_step(request)
        return js(step=step, verdict=0 if step == 2 and query in user_text(request) else 1,
                  evidence=[f"AFTER of step {step}"], feedback="the title shows an asterisk" if step == 2 else "")

    roles = Roles({"selector_initial": [pick(0, 2, done=True)], "selector_followup": [revision],
                   "verifier": verifier, "reviewer": reviews,
                   "judge": [js(qa=NOT_QA, decision="not_completed", failure_window=WINDOW, reason="Step 2's re-check shows the file unsaved.")]})
    model, script = roles.model(1 + 2 + 1 + 1 + 2 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    steps_verified = [asked_step(r) for r in roles.seen["verifier"]]
    assert sorted(steps_verified) == [0, 2, 2, 3]
    recheck = [r for r in roles.seen["verifier"] if asked_step(r) == 2][1]
    assert f"Assessment goal: {query}" in user_text(recheck)
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    revision_round = record.passes[1].rounds[0]
    assert revision_round.prompt == "revision"
    assert [(c.milestone.step, c.source, c.verdict) for c in revision_round.checks] == [
        (3, "selector", "success"), (2, "reviewer", "failure")]
    assert verdict.reward == 0
    text = "\n".join(summarize(verdict))
    assert text.startswith("themis (scripted/critic): REJECT after 9 calls")
    assert f"  step 2 (reviewer re-check): FAIL: {query} -> the title shows an asterisk" in text
    assert " review 1: 1 concerns" in text and " review 2: sound" in text


async def test_a_revision_may_choose_a_cited_step_again(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=3)
    reviews = [js(sound=False, concerns=[concern(1, "Is the text still there?")], summary="s"), SOUND]
    roles = Roles({"selector_initial": [pick(1, done=True)], "selector_followup": [pick(1, done=True)],
                   "verifier": verify_ok, "reviewer": reviews, "judge": [COMPLETED]})
    model, script = roles.model(1 + 1 + 1 + 1 + 1 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert [asked_step(r) for r in roles.seen["verifier"]] == [1, 1]
    assert verdict.reward == 1


async def test_the_terminating_step_is_refused_and_the_selector_asked_again(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=2)  # steps 0, 1 act; step 2 is done
    roles = Roles({"selector_initial": [pick(2), pick(1, done=True)], "verifier": verify_ok,
                   "reviewer": [SOUND], "judge": [COMPLETED]})
    model, script = roles.model(2 + 1 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    retry = roles.seen["selector_initial"][1]
    assert "step 2 is the terminating step" in user_text(retry)
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert [asked_step(r) for r in roles.seen["verifier"]] == [1]
    assert isinstance(verdict.record, ThemisRecord) and verdict.record.failures == []
    [rejected] = verdict.record.rejected
    assert rejected.what == "selector pass 0 round 1" and "terminating step" in (rejected.attempts[0].error or "")


async def test_a_selector_that_keeps_choosing_the_terminating_step_fails_and_is_reported(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=2)
    roles = Roles({"selector_initial": lambda r: pick(2), "reviewer": [SOUND],
                   "judge": [js(qa=NOT_QA, decision="not_completed", failure_window=WINDOW, reason="Nothing was verified.")]})
    model, script = roles.model(3 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert roles.count("verifier") == 0
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert record.passes[0].stopped == "failure"
    assert [(f.role, len(f.attempts)) for f in record.failures] == [("selector", 3)]
    assert "terminating step" in (record.failures[0].attempts[-1].error or "")
    assert "selector pass 0 round 1" in user_text(roles.seen["judge"][0])


async def test_an_unparseable_verifier_reply_is_retried_then_reported(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=2)
    roles = Roles({"selector_initial": [pick(0, done=True)],
                   "verifier": ["I think it worked!", '{"step": 0, "verdict": 1}', "still not json"],
                   "reviewer": [SOUND], "judge": [js(qa=NOT_QA, decision="uncertain", failure_window=WINDOW, reason="Step 0 was never verified.")]})
    model, script = roles.model(1 + 3 + 1 + 1)
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    check = record.checks()[0]
    assert check.verdict is None and check.feedback.startswith("not verified")
    assert len(check.call_ids) == 3
    failure = record.failures[0]
    assert failure.role == "verifier" and failure.attempts[0].reply == "I think it worked!"
    assert "evidence" in (failure.attempts[1].error or "")  # the schema named the missing field
    assert "was not accepted" in user_text(roles.seen["verifier"][1])
    assert "unverified (the verifier failed)" in user_text(roles.seen["judge"][0])
    assert verdict.reward == 0


async def test_a_failed_call_is_retried_and_a_failed_judge_is_an_error(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1)
    roles = Roles({"selector_initial": [pick(0, done=True)], "verifier": verify_ok, "reviewer": [SOUND],
                   "judge": ["no", "nope", "never"]})
    steps: list[object] = [roles, Reply(error=400, message="bad request"), roles, roles, roles, roles, roles]
    script = Script("critic", steps)  # type: ignore[arg-type]
    model = ChatModel.from_name("scripted/critic")
    verdict = await make_critic("themis", model)(task, rd)

    script.assert_done()
    assert verdict.reward is None and verdict.accepted is None
    assert verdict.error is not None and "judge" in verdict.error
    record = verdict.record
    assert isinstance(record, ThemisRecord)
    assert record.checks()[0].verdict == "success"  # the verifier's second attempt answered
    assert len(record.checks()[0].call_ids) == 2
    assert record.judge is None and [f.role for f in record.failures] == ["judge"]
    assert verdict.calls == 7


async def test_a_qa_judgement_needs_a_confirmed_answer(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1, instruction="How many rows does the sheet have? Answer with a number.",
                             final_action={"kind": "done", "answer": "12 rows"})
    bad = js(decision="completed", reason="The agent said 12.", qa={"is_qa": True, "final_answer": "12 rows"})
    good = js(decision="not_completed", failure_window=WINDOW, reason="The answer has extra words.",
              qa={"is_qa": True, "final_answer": "12 rows", "answer_ok": False})
    roles = Roles({"selector_initial": [pick(0, done=True)], "verifier": verify_ok, "reviewer": [SOUND],
                   "judge": [bad, good]})
    model, script = roles.model(1 + 1 + 1 + 2)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert "answer_ok" in user_text(roles.seen["judge"][1]) and verdict.reward == 0
    assert "question" in roles.seen["selector_initial"][0].messages[0].text()
    # The verifier of the milestone at step 0 is shown the agent's final answer.
    assert 'How the agent ended' in user_text(roles.seen["verifier"][0])
    assert 'done({"answer": "12 rows"})' in user_text(roles.seen["verifier"][0])


async def test_saved_verdicts_are_reused_only_for_the_same_critic(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1)
    roles = Roles({"selector_initial": [pick(0, done=True)], "verifier": verify_ok, "reviewer": [SOUND],
                   "judge": [COMPLETED]})
    model, script = roles.model(4)
    first = await grade_rollout(make_critic("themis", model), task, rd, durable=False)
    again = await grade_rollout(make_critic("themis", model), task, rd, reuse=True)
    script.assert_done()
    assert again == first
    with pytest.raises(FileNotFoundError, match="rollout-<k>"):
        await grade_rollout(make_critic("themis", model), task, RolloutDir(rd.path.parent / "rollout-9", "task-a", 9))


def test_make_critic_explains_bad_names_and_options() -> None:
    Script("x", [])
    model = ChatModel.from_name("scripted/x")
    with pytest.raises(ValueError, match=r"unknown critic 'oracle': use one of themis, lastk or sequential, or a dotted path package.module:Class"):
        make_critic("oracle", model)
    with pytest.raises(ValueError, match="option selector_rounds"):
        make_critic("themis", model, selector_rounds=0)
    with pytest.raises(ValueError, match="option k"):
        make_critic("lastk", model, k="two")
    assert png("x", "white").startswith(b"\x89PNG")


async def test_an_errored_verdict_is_saved_but_graded_again_on_a_rerun(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=1)
    down = [Reply(error=400, message="bad request")] * 3  # the selector's three attempts all fail as calls
    roles = Roles({"verifier": verify_ok, "reviewer": [SOUND], "judge": [COMPLETED]})
    # The judge still answers; a selector that was never reached is a failure all the same.
    script = Script("critic", [*down, roles, roles])  # type: ignore[list-item]
    model = ChatModel.from_name("scripted/critic")
    first = await grade_rollout(make_critic("themis", model), task, rd, durable=False)
    script.assert_done()
    assert first.reward is None and first.error is not None and "every call failed" in first.error
    assert "ERROR" in summarize(first)[0]
    saved = load_verdict(rd.path, "themis")
    assert saved is not None and saved.error == first.error  # the failure shows on disk ...
    roles = Roles({"selector_initial": [pick(0, done=True)], "verifier": verify_ok, "reviewer": [SOUND],
                   "judge": [COMPLETED]})
    model, script = roles.model(4)
    again = await grade_rollout(make_critic("themis", model), task, rd, reuse=True, durable=False)
    script.assert_done()  # ... but is never reused: the rerun asked the critic again
    assert again.reward == 1 and again.error is None


def test_a_version_1_verdict_with_an_error_reads_as_an_error(runs: Path) -> None:
    from themis import Verdict
    old = {"critic": "lastk", "model": "m", "reward": 0, "reason": "no sample", "error": "no sample produced a valid reply",
           "record": {"kind": "lastk", "frames": [], "vote": "majority", "samples": [], "failures": []},
           "schema_version": 1}
    verdict = Verdict.model_validate(old)
    assert verdict.reward is None and verdict.accepted is None
    with pytest.raises(ValueError, match="either a reward or an error"):
        Verdict.model_validate({**old, "error": None, "reward": None})
