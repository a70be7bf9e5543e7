"""Judging runs from disk: candidates, written records, re-judging from the cache,
the baseline representations and OSWorld imports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bjudge_helpers import answer_for, fact_from_action, screen, user_text

from bjudge import (
    FactCache,
    JudgeConfig,
    MissingTaskError,
    OSWorldImportError,
    RepresentationConfig,
    frame_indices,
    import_osworld,
    judge_run,
    make_judge,
    make_representer,
)
from core.llm import ImagePart, Reply
from core.llm.scripted import ScriptRequest
from core.trajectory import RunLayout

SOLVED = "File report.txt saved"


async def test_judging_a_run_picks_the_solver_among_finished_rollouts_and_rejudging_narrates_nothing(
        scripted, run_with_three: RunLayout) -> None:
    cache = FactCache(run_with_three.path / "narratives-cache")
    narrator_script, narrator = scripted("narrator", [fact_from_action] * 5)
    judge_script, judge_model = scripted("judge", [answer_for(SOLVED)])
    judged = await judge_run(run_with_three, make_representer("narrative", narrator, cache),
                             make_judge("mcq", judge_model, JudgeConfig(seed=11)))
    narrator_script.assert_done()
    judge_script.assert_done()
    selection = judged["t1"].selection
    assert selection.candidates == [0, 1, 2]  # the errored rollout 3 is not a candidate
    assert selection.chosen == 1
    task_dir = run_with_three.task("t1")
    assert task_dir.read_selection() == selection
    assert task_dir.read_narrative(1).facts == [["Typed the report text"], [SOLVED]]
    prompt = user_text(judge_script.requests[0])
    assert "1.0" not in prompt and "score" not in prompt.lower()  # the evaluator's score never leaks
    assert "declared the task impossible" in prompt  # rollout 2's own ending is shown

    again, narrator2 = scripted("narrator", [])
    _judge_again, judge_model2 = scripted("judge", [answer_for(SOLVED)])
    rejudged = await judge_run(run_with_three, make_representer("narrative", narrator2, FactCache(cache.path)),
                               make_judge("mcq", judge_model2, JudgeConfig(seed=5)))
    again.assert_done()
    assert again.requests == []
    assert rejudged["t1"].selection.chosen == 1


async def test_a_task_without_task_json_is_refused_in_one_line(scripted, tmp_path: Path) -> None:
    from bjudge_helpers import write_rollout

    layout = RunLayout(tmp_path, "r", durable=False)
    write_rollout(layout, "orphan", 0, ["x"])
    _, model = scripted("m", [])
    with pytest.raises(MissingTaskError, match=r"has no task\.json"):
        await judge_run(layout, make_representer("screenshots", None, FactCache(None)), make_judge("mcq", model))


def test_frames_are_evenly_spaced_with_both_ends() -> None:
    assert frame_indices(11, 3) == [0, 5, 10]
    assert frame_indices(4, 10) == [0, 1, 2, 3]
    assert frame_indices(5, 1) == [4]
    assert frame_indices(0, 3) == []


async def test_screenshot_only_representation_spends_the_budget_over_candidates(run_with_three) -> None:
    rep = make_representer("screenshots", None, FactCache(None), cfg=RepresentationConfig(screenshot_budget=6))
    rds = [run_with_three.rollout("t1", k) for k in (0, 1, 2)]
    candidates = await rep.candidates("task", rds)
    images = [sum(isinstance(p, ImagePart) for p in c.parts) for c in candidates]
    assert images == [2, 2, 2]  # 6 // 3 per rollout: the first and the last screen
    assert "Start screen" in candidates[0].text() and "After step 2" in candidates[0].text()


async def test_summary_and_caption_representations_call_once_per_rollout_and_per_screen(scripted, run_with_three) -> None:
    cache = FactCache(None)
    rds = [run_with_three.rollout("t1", k) for k in (0, 1)]
    script, model = scripted("summ", [Reply(text="<summary>It saved the file.</summary>")] * 2)
    summaries = await make_representer("summary", model, cache).candidates("task", rds)
    script.assert_done()
    assert all("It saved the file." in c.text() for c in summaries)
    assert {r.module for r in script.requests} == {"narrative"}

    script, model = scripted("caps", [Reply(text="<caption>A grey desktop.</caption>")] * 6)
    captions = await make_representer("captions", model, cache).candidates("task", rds)
    script.assert_done()  # 3 distinct screens per rollout
    assert captions[0].text().count("A grey desktop.") == 3
    again, model = scripted("caps", [])
    await make_representer("captions", model, cache).candidates("task", rds)
    again.assert_done()


def _osworld_result(root: Path, model: str, example: str, actions: list[str], score: str | None) -> None:
    folder = root / "pyautogui" / "screenshot" / model / "os" / example
    folder.mkdir(parents=True)
    (folder / "step_0.png").write_bytes(screen(0))
    (folder / "instruction.txt").write_text("Create the folder reports")
    lines = []
    for i, action in enumerate(actions, start=1):
        name = f"step_{i}_20250101@0000{i:02d}.png"
        (folder / name).write_bytes(screen(i))
        lines.append(json.dumps({"step_num": i, "action": action, "response": "thinking", "reward": 0,
                                 "done": action == "DONE", "info": {}, "screenshot_file": name}))
    (folder / "traj.jsonl").write_text("\n".join(lines) + "\n")
    if score is not None:
        (folder / "result.txt").write_text(score)


async def test_osworld_results_import_as_rollouts_and_can_be_judged(scripted, tmp_path: Path) -> None:
    r1, r2 = tmp_path / "results1", tmp_path / "results2"
    _osworld_result(r1, "gpt-5", "abc-1", ["import pyautogui; pyautogui.moveTo(10, 20); pyautogui.dragTo(30, 40)",
                                           "DONE"], "1.0")
    _osworld_result(r2, "gpt-5", "abc-1", ["pyautogui.click(x=5, y=6)", "pyautogui.press('enter')"], "0")
    layout = RunLayout(tmp_path / "runs", "imported", durable=False)
    report = import_osworld([r1, r2], layout)
    assert report.rollouts == {"abc-1": [0, 1]}
    headers = layout.task("abc-1").headers()
    assert headers[0].status == "done" and headers[0].score == 1.0 and headers[0].step_count == 2
    assert headers[1].status == "step_limit" and headers[1].score == 0.0
    steps = list(layout.rollout("abc-1", 0).iter_steps())
    assert [(p.kind, p.x, p.y) for p in steps[0].pointer] == [("move", 10, 20), ("drag", 30, 40)]
    assert steps[1].action == {"kind": "done"} and steps[1].before_screenshot == steps[0].after_screenshot

    def narrate(request: ScriptRequest) -> str:  # transitions arrive concurrently: answer by content
        text = user_text(request)
        fact = "Dragged a file" if "dragTo" in text else "Clicked" if "click" in text else "Pressed enter"
        return f"<facts>- {fact}</facts>"

    narrator_script, narrator = scripted("narrator", [narrate] * 3)
    _judge_script, judge_model = scripted("judge", [answer_for("F1.1 Dragged a file")])
    judged = await judge_run(layout, make_representer("narrative", narrator, FactCache(None)),
                             make_judge("mcq", judge_model, JudgeConfig(seed=0)))
    narrator_script.assert_done()
    assert judged["abc-1"].selection.chosen == 0


def test_import_errors_say_what_to_pass(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "runs", "x", durable=False)
    with pytest.raises(OSWorldImportError, match="not a folder"):
        import_osworld([tmp_path / "missing"], layout)
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSWorldImportError, match=r"no traj\.jsonl"):
        import_osworld([tmp_path / "empty"], layout)
    _osworld_result(tmp_path / "r", "m", "t", ["DONE"], None)
    (tmp_path / "r" / "pyautogui" / "screenshot" / "m" / "os" / "t" / "instruction.txt").unlink()
    with pytest.raises(OSWorldImportError, match="evaluation_examples/examples"):
        import_osworld([tmp_path / "r"], layout)
