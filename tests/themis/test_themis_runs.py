"""Grading a whole run, exporting what the critic accepts, and what the roles are shown of
large screenshots and of odd trajectories."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from critic_fixtures import NOT_QA, RUN_ID, Roles, asked_step, build_rollout, images_of, js, user_text
from PIL import Image

from core.trajectory import RolloutInfo, RunLayout, Step
from themis import ThemisRecord, export_accepted, grade_many, make_critic, run_items

#: Where failure begins: the paper's judge contract asks for it with every decision but "completed".
WINDOW = {"start_step": 0, "end_step": 0, "reason": "the first step already shows the problem"}


def big_png(colour: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (1920, 1080), colour).save(buf, "PNG")
    return buf.getvalue()


async def test_grade_a_run_and_export_the_accepted_rollouts(runs: Path, tmp_path: Path) -> None:
    build_rollout(runs, task_id="good", actions=2, instruction="Make the title bold")
    build_rollout(runs, task_id="good", k=1, actions=2, instruction="Make the title bold")
    build_rollout(runs, task_id="poor", actions=2, instruction="Rename the sheet")
    layout = RunLayout(runs, RUN_ID, durable=False)
    # A rollout still running and one whose environment died are not graded by default.
    layout.rollout("poor", 1).start(RolloutInfo(run_id=RUN_ID, task_id="poor", rollout=1, model="m", started_at=0))
    lost = layout.rollout("poor", 2)
    lost.start(RolloutInfo(run_id=RUN_ID, task_id="poor", rollout=2, model="m", started_at=0))
    lost.finish("environment_lost")

    items = run_items(layout)
    assert [key for key, _, _ in items] == ["good/rollout-0", "good/rollout-1", "poor/rollout-0"]
    assert [key for key, _, _ in run_items(layout, include_world_failures=True)][-1] == "poor/rollout-2"

    def judge(request: object) -> str:
        text = user_text(request)  # type: ignore[arg-type]
        return js(reason="seen", score=int("Make the title bold" in text))

    roles = Roles({"lastk": judge})
    model, script = roles.model(3)
    graded = await grade_many(make_critic("lastk", model), items, concurrency=3)
    script.assert_done()
    assert [g.accepted for g in graded] == [True, True, False]

    out = RunLayout(tmp_path / "export", "accepted", durable=False)
    written = await export_accepted(graded, out)
    assert [p.relative_to(out.path).as_posix() for p in written] == ["good/rollout-0", "good/rollout-1"]
    copied = out.rollout("good", 1)
    assert copied.read().steps == layout.rollout("good", 1).read().steps
    assert (copied.path / "critic-lastk.json").is_file() and out.task("good").read_task() is not None
    assert not (out.path / "poor").exists()

    with pytest.raises(FileNotFoundError, match="not a run folder"):
        run_items(RunLayout(tmp_path, "missing"))


async def test_large_screens_are_downscaled_and_the_selector_can_see_all_of_them(runs: Path) -> None:
    layout = RunLayout(runs, RUN_ID, durable=False)
    rd = layout.rollout("t", 0)
    rd.start(RolloutInfo(run_id=RUN_ID, task_id="t", rollout=0, model="m", started_at=0))
    colours = ["white", "red", "blue"]
    for i in range(2):
        rd.append_step(Step(index=i, action={"kind": "click", "element_description": "x"}),
                       {"before": big_png(colours[i]), "after": big_png(colours[i + 1])})
    rd.finish("step_limit")
    roles = Roles({"selector_initial": [js(milestones=[{"step": 1, "goal": "blue screen", "why": "end"}],
                                           done=True, reason="one")],
                   "verifier": lambda r: js(step=asked_step(r), verdict=1, evidence=["blue"]),
                   "reviewer": [js(concerns=[], sound=True)], "judge": [js(qa=NOT_QA, decision="completed", reason="blue")]})
    model, script = roles.model(4)
    verdict = await make_critic("themis", model, selector_screens="all", thumbnail_side=320)("Turn it blue", rd)
    script.assert_done()
    sizes = [Image.open(io.BytesIO(i.data)).size for i in images_of(roles.seen["selector_initial"][0])]
    assert sizes == [(320, 180)] * 3  # the first screen and the screen after each step
    sizes = [Image.open(io.BytesIO(i.data)).size for i in images_of(roles.seen["verifier"][0])]
    assert sizes == [(1280, 720)] * 2
    # Without a terminating step the last acting step may be a milestone.
    assert isinstance(verdict.record, ThemisRecord) and verdict.record.checks()[0].milestone.step == 1
    assert verdict.reward == 1


async def test_a_trajectory_with_only_a_terminating_step_skips_the_selector(runs: Path) -> None:
    task, rd = build_rollout(runs, actions=0)
    roles = Roles({"reviewer": [js(concerns=[], sound=True)],
                   "judge": [js(qa=NOT_QA, decision="not_completed", failure_window=WINDOW, reason="The agent declared success without acting.")]})
    model, script = roles.model(2)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert isinstance(verdict.record, ThemisRecord) and verdict.record.passes[0].stopped == "exhausted"
    assert verdict.reward == 0
    with pytest.raises(ValueError, match="instruction to grade against is empty"):
        await make_critic("themis", model)("  ", rd)


async def test_uitars_finished_ends_the_trajectory_and_a_long_answer_reaches_the_judge_whole(runs: Path) -> None:
    answer = "; ".join(f"row {i}: total {i * 7}" for i in range(40))  # about 600 characters
    assert len(answer) > 400
    task, rd = build_rollout(runs, actions=1, instruction="List every row's total.",
                             final_action={"kind": "finished", "content": answer})
    roles = Roles({"selector_initial": [js(milestones=[{"step": 0, "goal": "totals visible", "why": "w"}], done=True,
                                           reason="r")],
                   "verifier": lambda r: js(step=asked_step(r), verdict="success", evidence=["AFTER shows totals"]),
                   "reviewer": [js(sound=True, concerns=None, summary="ok")],
                   "judge": [js(qa=NOT_QA, decision="Not Completed", failure_window=WINDOW, reason="The format is wrong.")]})
    model, script = roles.model(4)
    verdict = await make_critic("themis", model)(task, rd)
    script.assert_done()
    assert verdict.reward == 0
    judge_text = user_text(roles.seen["judge"][0])
    assert "Step 1 [terminating step" in judge_text and answer in judge_text


@pytest.mark.parametrize("name", ["done", "DONE", "FAIL", "finished", "call_user", "terminate", "status", "infeasible"])
def test_terminating_actions_of_every_grammar_end_the_trajectory(name: str) -> None:
    from themis.view import TrajectoryView
    steps = [Step(index=0, action={"action_type": name}, before_screenshot="s0.png", after_screenshot="s1.png"),
             Step(index=1, action={"kind": "click"}, before_screenshot="s1.png", after_screenshot="s2.png")]
    view = TrajectoryView(None, steps, image_side=None)  # type: ignore[arg-type]
    assert view.steps[0].terminal and not view.steps[1].terminal and view.selectable == [1]
