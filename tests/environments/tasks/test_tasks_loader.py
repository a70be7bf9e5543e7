"""Loader: valid files load, extra fields survive, and every malformed input is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.tasks import TaskFileError, load_task, load_task_list, parse_task

MINIMAL = {"id": "abc", "instruction": "Rename the file.", "evaluator": {"func": "exact_match"}}


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_minimal_task_loads_with_defaults(tmp_path: Path) -> None:
    task = load_task(_write(tmp_path / "abc.json", MINIMAL), domain="os")
    assert task.id == "abc" and task.config == [] and task.evaluator.conj == "and"
    assert task.domain == "os" and task.source_path == str((tmp_path / "abc.json").resolve())
    assert [c.func for c in task.evaluator.calls()] == ["exact_match"]


def test_unknown_fields_are_kept(tmp_path: Path) -> None:
    data = MINIMAL | {"hint": "look left", "evaluator": {"func": "exact_match", "_note": 1}}
    task = load_task(_write(tmp_path / "abc.json", data))
    assert task.extra == {"hint": "look left"}
    assert task.evaluator.model_extra == {"_note": 1}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"instruction": "x", "evaluator": {"func": "f"}}, "'id'"),
        ({"id": "a", "evaluator": {"func": "f"}}, "'instruction'"),
        ({"id": "a", "instruction": "x"}, "'evaluator'"),
        ({"id": "a", "instruction": "x", "evaluator": {}}, "'evaluator.func'"),
        ({**MINIMAL, "config": [{"parameters": {}}]}, "'config[0].type'"),
        ({**MINIMAL, "config": "launch"}, "'config'"),
    ],
)
def test_missing_or_bad_field_names_file_and_field(tmp_path: Path, data: dict, field: str) -> None:
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(TaskFileError) as info:
        load_task(path)
    message = str(info.value)
    assert str(path) in message and field in message
    assert "\n" not in message


def test_every_bad_field_is_named_once_in_one_line(tmp_path: Path) -> None:
    """The file, the task's id and each bad field's path: a union's members (a getter or a
    list of getters) refusing the same value name its field once, by its first reason."""
    data = MINIMAL | {
        "proxy": "sometimes",
        "config": [{"type": "execute", "parameters": {"command": "ls", "shell": "yes"}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "shell": 1}},
    }
    path = _write(tmp_path / "abc.json", data)
    with pytest.raises(TaskFileError) as info:
        load_task(path)
    message = str(info.value)
    assert message.startswith(f"{path} (task abc): ") and message.endswith("; fix the task file")
    for field in ("'config[0].parameters'", "'evaluator.result'", "'proxy'"):
        assert message.count(field) == 1, message
    assert "\n" not in message and "GetterSpec" not in message and "function-after" not in message


async def test_a_loaded_task_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell_client) -> None:
    """Set-up and scoring read the loaded record's typed fields: after load, no task model
    is validated again (the record goes to the environment as it is)."""
    from core.trajectory import Evaluator, SetupStep, Task
    from environments.tasks.handling import set_up_with

    step = {"type": "execute", "parameters": {"command": "echo made > ~/out.txt", "shell": True}}
    task = load_task(_write(tmp_path / "abc.json", MINIMAL | {"config": [step]}))
    validated: list[str] = []
    for model in (Task, SetupStep, Evaluator):
        original = model.model_validate.__func__  # type: ignore[attr-defined]
        monkeypatch.setattr(model, "model_validate", classmethod(
            lambda cls, *a, _o=original, **k: validated.append(cls.__name__) or _o(cls, *a, **k)))
    await set_up_with(shell_client, task, tmp_path / "cache")
    assert (shell_client.home / "out.txt").read_text() == "made\n"
    assert validated == []


def test_parallel_lists_must_match_funcs() -> None:
    data = MINIMAL | {"evaluator": {"func": ["a", "b"], "result": [{"type": "rule"}], "expected": None}}
    with pytest.raises(TaskFileError, match="result: has 1 entries for 2 funcs"):
        parse_task(data, "x.json")


def test_metric_list_splits_into_calls() -> None:
    data = MINIMAL | {
        "evaluator": {
            "func": ["exact_match", "check_include_exclude"],
            "conj": "or",
            "result": [
                {"type": "vm_command_line", "command": "ls"},
                {"type": "vm_file", "path": "~/a", "dest": "a"},
            ],
            "expected": [{"type": "rule", "rules": {"expected": "x"}}, None],
            "options": [None, {"x": 1}],
        }
    }
    calls = parse_task(data, "x.json").evaluator.calls()
    assert [c.func for c in calls] == ["exact_match", "check_include_exclude"]
    assert calls[0].result is not None and calls[0].result.params == {"command": "ls"}
    assert calls[1].expected is None and calls[1].options == {"x": 1} and calls[0].options == {}


@pytest.mark.parametrize(
    ("text", "needle"), [("{not json", "not valid JSON"), ("[1, 2]", "must hold a JSON object")]
)
def test_undecodable_files(tmp_path: Path, text: str, needle: str) -> None:
    path = _write(tmp_path / "t.json", text)
    with pytest.raises(TaskFileError, match=needle):
        load_task(path)


def test_a_file_nested_too_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    path = _write(tmp_path / "t.json", '{"id": "t", "instruction": "x", "config": ' + deep + "}")
    with pytest.raises(TaskFileError, match="nests deeper than 64 levels") as info:
        load_task(path)
    assert "\n" not in str(info.value)
    listed = _write(tmp_path / "list.json", '{"os": ' + deep + "}")
    with pytest.raises(TaskFileError, match="the task list nests deeper"):
        load_task_list(listed)
    brackets_in_text = {"id": "t", "instruction": "[" * 500, "config": [], "evaluator": {"func": "infeasible"}}
    assert load_task(_write(tmp_path / "ok.json", json.dumps(brackets_in_text))).instruction == "[" * 500


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="cannot read the task file"):
        load_task(tmp_path / "nope.json")


def test_task_list_loads_in_order_and_checks_ids(tmp_path: Path) -> None:
    for domain, task_id in [("os", "a"), ("os", "b"), ("calc", "c")]:
        _write(tmp_path / "examples" / domain / f"{task_id}.json", MINIMAL | {"id": task_id})
    listing = _write(tmp_path / "list.json", {"os": ["b", "a"], "calc": ["c"]})
    tasks = load_task_list(listing)
    assert [(t.domain, t.id) for t in tasks] == [("os", "b"), ("os", "a"), ("calc", "c")]

    _write(tmp_path / "examples" / "os" / "d.json", MINIMAL | {"id": "other"})
    with pytest.raises(TaskFileError, match="'id' is 'other' but the list names 'd'"):
        load_task_list(_write(tmp_path / "list2.json", {"os": ["d"]}))
    with pytest.raises(TaskFileError, match="task os/zzz has no file"):
        load_task_list(_write(tmp_path / "list3.json", {"os": ["zzz"]}))
    with pytest.raises(TaskFileError, match="must map to a list of task id strings"):
        load_task_list(_write(tmp_path / "list4.json", {"os": "a"}))


@pytest.mark.parametrize("spelling", [True, False, None, "true", "false"])
def test_shell_spellings_of_osworlds_task_files_load_as_written(tmp_path: Path, spelling: object) -> None:
    step = {"type": "execute", "parameters": {"command": "true", "shell": spelling}}
    getter = {"type": "vm_command_line", "command": "true", "shell": spelling}
    data = MINIMAL | {"config": [step], "evaluator": {"func": "exact_match", "result": getter}}
    task = load_task(_write(tmp_path / "abc.json", data))
    assert task.config[0].parameters["shell"] == spelling  # OSWorld's controller sends it on as is


@pytest.mark.parametrize("spelling", ["yes", "True", "", 1, ["x"]])
def test_other_shell_spellings_are_refused_with_one_line(tmp_path: Path, spelling: object) -> None:
    step = {"type": "execute", "parameters": {"command": "true", "shell": spelling}}
    with pytest.raises(TaskFileError) as caught:
        load_task(_write(tmp_path / "abc.json", MINIMAL | {"config": [step]}))
    assert "shell must be true or false" in str(caught.value) and "\n" not in str(caught.value)
    getter = {"type": "vm_command_line", "command": "true", "shell": spelling}
    with pytest.raises(TaskFileError, match="shell must be true or false"):
        load_task(_write(tmp_path / "abc.json", MINIMAL | {"evaluator": {"func": "exact_match", "result": getter}}))
