"""Read task files and task lists in OSWorld's layout.

A task list (``test_all.json``) maps a domain to task ids; the task file for an id is
``examples/<domain>/<id>.json`` beside the list. Every failure is a `TaskFileError` whose
message is one line naming the file and the offending field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.trajectory import Task
from environments.tasks.errors import TaskFileError

__all__ = ["MAX_DEPTH", "iter_task_files", "load_task", "load_task_list", "parse_task", "read_task_list"]


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "bool") or "[" in part or part[:1].isupper():
            continue  # a union's member (`GetterSpec`, `list[...]`, `function-after[...]`), not a field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


#: How many bad fields one error line names before it counts the rest.
_SHOWN = 5


def _describe(error: ValidationError) -> str:
    """Each bad field with its path and what is wrong, in one line."""
    by_field: dict[str, str] = {}  # a union's members each refuse a value: its first reason says it
    for each in error.errors():
        field = _field_path(tuple(each["loc"]))
        by_field.setdefault(field, f"required field {field!r} is missing" if each["type"] == "missing"
                            else f"field {field!r}: {each['msg']}")
    problems = list(by_field.values())
    more = f" (and {len(problems) - _SHOWN} more problem(s))" if len(problems) > _SHOWN else ""
    return "; ".join(problems[:_SHOWN]) + more


#: How deep a task file or list may nest (OSWorld's own tasks reach 9): deeper is refused in
#: one line before the JSON parser, which would exhaust Python's recursion on it, sees it.
MAX_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _decode(text: str, path: Path, what: str) -> Any:
    """The JSON in `text`, or `TaskFileError` in one line naming the file."""
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise TaskFileError(f"{path}: {what} nests deeper than {MAX_DEPTH} levels; fix the file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise TaskFileError(f"{path}: {what} nests too deep; fix the file") from None


def parse_task(data: Any, source: str = "<task>", *, path: Path | None = None, domain: str = "") -> Task:
    """Validate an already-decoded task object, once: the `Task` every room reads after this.
    `source` names it in errors (with the task's id when it has one); `path` is the file it
    came from (its folder resolves the set-up steps' relative files)."""
    if not isinstance(data, dict):
        raise TaskFileError(f"{source}: a task file must hold a JSON object, found {type(data).__name__}")
    named = f"{source} (task {data['id']})" if isinstance(data.get("id"), str) else source
    try:
        return Task.from_osworld(data, source_path=str(path) if path is not None else None, domain=domain)
    except ValidationError as exc:
        raise TaskFileError(f"{named}: {_describe(exc)}; fix the task file") from None


def load_task(path: str | Path, domain: str = "") -> Task:
    """Read and validate one task file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot read the task file ({exc.strerror or exc})") from None
    data = _decode(text, path, "the task file")
    return parse_task(data, str(path), path=path.resolve(), domain=domain)


def read_task_list(list_file: str | Path) -> dict[str, list[str]]:
    """The `{domain: [task id, ...]}` object of a task list, checked for shape."""
    list_file = Path(list_file)
    try:
        text = list_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"{list_file}: cannot read the task list ({exc.strerror or exc})") from None
    data = _decode(text, list_file, "the task list")
    if not isinstance(data, dict):
        raise TaskFileError(f"{list_file}: a task list must be an object mapping domains to lists of ids")
    for domain, ids in data.items():
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise TaskFileError(f"{list_file}: domain {domain!r} must map to a list of task id strings")
    return data


def load_task_list(list_file: str | Path, examples_dir: str | Path | None = None) -> list[Task]:
    """Load every task a list names, in list order.

    `examples_dir` defaults to ``examples`` beside the list file. A task whose `id` differs
    from its file name is an error: ids are how results are filed.
    """
    list_file = Path(list_file)
    root = Path(examples_dir) if examples_dir is not None else list_file.parent / "examples"
    tasks = []
    for domain, ids in read_task_list(list_file).items():
        for task_id in ids:
            path = root / domain / f"{task_id}.json"
            if not path.is_file():
                raise TaskFileError(f"{list_file}: task {domain}/{task_id} has no file {path}")
            task = load_task(path, domain)
            if task.id != task_id:
                raise TaskFileError(f"{path}: field 'id' is {task.id!r} but the list names {task_id!r}")
            tasks.append(task)
    return tasks


def iter_task_files(root: str | Path) -> Iterator[tuple[str, Path]]:
    """(domain, path) for every ``<root>/<domain>/<file>.json``, sorted."""
    root = Path(root)
    for path in sorted(root.glob("*/*.json")):
        yield path.parent.name, path
