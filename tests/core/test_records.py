"""The versioned records: JSON round trips, version checks, derived fields."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from core.llm.records import CallRecord
from core.trajectory import (
    Narrative,
    PointerEvent,
    RolloutInfo,
    Selection,
    Step,
    StepTimings,
    Task,
    TaskResult,
    Trajectory,
)

OSWORLD_TASK: dict[str, Any] = {
    "id": "bb5e4c0d-f964-439c-97b6-bdb9747de3f4",
    "snapshot": "chrome",
    "instruction": "Make Bing the default search engine.",
    "source": "https://example.org/question",
    "config": [{"type": "launch", "parameters": {"command": ["google-chrome"]}}],
    "trajectory": "trajectories/",
    "related_apps": ["chrome"],
    "evaluator": {"func": "match_in_list", "result": {"type": "default_search_engine"}},
    "proxy": False,
}


def full_step() -> Step:
    return Step(
        index=4,
        started_at=1700000000.5,
        thought="The dialog is open; confirm it.",
        reflection="Last click opened the dialog as planned.",
        action={"type": "click", "element": "OK button", "clicks": 1},
        code="import pyautogui; pyautogui.click(10, 20)",
        before_screenshot="step-0004-before.png",
        after_screenshot="step-0004-after.png",
        pointer=[PointerEvent(kind="move", x=5, y=6), PointerEvent(kind="click", x=10, y=20)],
        code_agent={"turns": [{"code": "print(1)", "stdout": "1\n"}], "summary": "printed"},
        guide={"candidates": 3, "scores": [7, 3, 5], "chosen": 0},
        call_ids=["c1", "c2"],
        timings=StepTimings(propose=1.5, execute=0.3, settle=0.7),
        error=None,
    )


RECORDS: list[BaseModel] = [
    Task.from_osworld(OSWORLD_TASK, source_path="evaluation_examples/chrome/x.json"),
    full_step(),
    RolloutInfo(
        run_id="r",
        task_id="t",
        rollout=2,
        model="openai/gpt-5",
        seed=7,
        environment="local-1",
        status="step_limit",
        reason="50 steps",
        attempts=2,
        started_at=1.0,
        ended_at=2.0,
        step_count=50,
        score=0.5,
    ),
    Narrative(
        rollout=1,
        initial_state="An empty sheet.",
        facts=[["Cell A1 holds 3."], []],
        final_state="A1 holds 3.",
        content_hashes={"step-0000-before.png": "ab" * 32},
        model="anthropic/claude",
    ),
    Selection(
        strategy="bjudge_mcq",
        candidates=[0, 1, 2],
        chosen=1,
        reasoning="Only B saved the file.",
        seed=3,
        permutations=[[2, 0, 1]],
        dollars=0.02,
        call_ids=["j1"],
    ),
    TaskResult.from_scores("t", {0: 0.0, 1: 1.0, 2: None}, selected=1),
    CallRecord(id="c1", module="policy", model="openai/gpt-5", started_at=1.0, seconds=2.0, input_tokens=10),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip_through_json(record: BaseModel) -> None:
    again = type(record).model_validate_json(record.model_dump_json())
    assert again == record
    assert again.model_dump() == record.model_dump()


def test_trajectory_round_trip_holds_steps() -> None:
    info = RECORDS[2]
    assert isinstance(info, RolloutInfo)
    trajectory = Trajectory(info=info, steps=[Step(index=0), full_step()])
    assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory


def test_newer_schema_is_refused_with_a_clear_message() -> None:
    data = full_step().model_dump()
    data["schema_version"] = 2
    with pytest.raises(ValidationError, match="Step schema 2 is newer than this program's 1; upgrade"):
        Step.model_validate(data)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="thougth"):
        Step.model_validate({"index": 0, "thougth": "typo"})


def test_osworld_task_survives_import_and_export() -> None:
    task = Task.from_osworld({**OSWORLD_TASK, "hint": "the gear icon"}, platform="ubuntu")
    assert task.snapshot == "chrome" and task.related_apps == ["chrome"]
    assert (task.source, task.trajectory, task.proxy) == (OSWORLD_TASK["source"], "trajectories/", False)
    assert task.config[0].type == "launch" and task.config[0].parameters == {"command": ["google-chrome"]}
    assert task.evaluator is not None and task.evaluator.calls()[0].result is not None
    assert task.extra == {"hint": "the gear icon"}
    assert task.to_osworld() == {**OSWORLD_TASK, "hint": "the gear icon"}


def test_exported_task_adds_no_key_the_file_did_not_give() -> None:
    """Defaults (conj, postconfig, parameters, snapshot, proxy ...) stay out of the export
    and out of task.json, so an exported task is the imported one after any round trip."""
    bare = {"id": "t", "instruction": "x", "config": [{"type": "login"}], "evaluator": {"func": "exact_match"}}
    task = Task.from_osworld(bare)
    assert task.evaluator is not None and task.evaluator.conj == "and" and task.config[0].parameters == {}
    assert task.to_osworld() == bare
    assert Task.model_validate_json(task.model_dump_json()).to_osworld() == bare


def test_task_json_keeps_the_shape_older_runs_wrote() -> None:
    """A run folder's task.json from before the OSWorld parts were typed (typed keys under
    `extra`, no evaluator as ``{}``) reads into typed fields and is written back unchanged."""
    old = {
        "schema_version": 1, "id": "t", "instruction": "x", "platform": "ubuntu", "snapshot": "chrome",
        "related_apps": [], "config": [{"type": "sleep", "parameters": {"seconds": 1}}], "evaluator": {},
        "complexity": None, "max_steps": None, "source_path": None,
        "extra": {"proxy": True, "source": ["a", "b"], "hint": "h"},
    }
    task = Task.model_validate(old)
    assert task.proxy is True and task.source == ["a", "b"] and task.evaluator is None
    assert task.config[0].parameters == {"seconds": 1} and task.extra == {"hint": "h"}
    assert task.model_dump(mode="json") == old


def test_a_bad_task_field_is_refused_with_its_path() -> None:
    with pytest.raises(ValidationError) as caught:
        Task.from_osworld({**OSWORLD_TASK, "config": [{"type": "execute", "parameters": {"shell": "yes"}}]})
    assert caught.value.errors()[0]["loc"][:3] == ("config", 0, "parameters")
    with pytest.raises(ValidationError, match="proxy"):
        Task.from_osworld({**OSWORLD_TASK, "proxy": "sometimes"})


def test_selection_must_choose_a_candidate() -> None:
    with pytest.raises(ValidationError, match="not among candidates"):
        Selection(strategy="x", candidates=[0, 1], chosen=3)
    assert Selection(strategy="x", candidates=[0, 1], chosen=None).chosen is None


def test_task_result_derives_pass_at_n_and_selected_score() -> None:
    result = TaskResult.from_scores("t", {0: 0.0, 1: 1.0, 2: None}, selected=0)
    assert (result.n, result.pass_at_n, result.selected_score) == (3, 1.0, 0.0)
    unscored = TaskResult.from_scores("t", {0: None}, selected=None)
    assert unscored.pass_at_n is None and unscored.selected_score is None
    # JSON object keys are strings; rollout indices come back as ints.
    assert TaskResult.model_validate_json(result.model_dump_json()).scores == {0: 0.0, 1: 1.0, 2: None}


def test_field_docstrings_reach_the_schema() -> None:
    props = RolloutInfo.model_json_schema()["properties"]
    assert "header" not in props and "environment died" in props["status"]["description"]
    assert Step.model_json_schema()["properties"]["index"]["description"].startswith("Position")
