"""The local suite's files: valid, runnable offline, fixtures as declared, gold differs from input."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import openpyxl
import pytest
from tasks_suite_data import DOCS, FILES, SHEETS, TEXT

from environments.tasks import SUITE_DIR, load_suite, support_report, task_gaps
from environments.tasks.official import metric


def test_suite_is_large_and_covers_every_app() -> None:
    tasks = load_suite()
    assert len(tasks) >= 12
    assert len({t.id for t in tasks}) == len(tasks)
    domains = {t.domain for t in tasks}
    assert {"mousepad", "terminal", "files", "libreoffice_calc", "libreoffice_writer"} <= domains
    assert sum(t.domain.startswith("libreoffice") for t in tasks) >= 5
    report = support_report(tasks)
    assert report.runnable == report.offline == len(tasks), [task_gaps(t) for t in tasks]


def test_every_task_prepares_state_and_uses_home_relative_paths() -> None:
    for task in load_suite():
        assert task.config, task.id
        text = json.dumps(task.model_dump(mode="json"))
        assert "/home/user" not in text and "/root" not in text, task.id
        for step in task.all_steps():
            for entry in step.parameters.get("files", []):
                assert (task.base_dir / entry["local_path"]).is_file(), (task.id, entry)


def _without_trailing_blanks(row: list[object]) -> list[object]:
    kept = list(row)
    while kept and kept[-1] is None:
        kept.pop()
    return kept


def _sheets(path: Path) -> tuple[list[str], list[list[list[object]]]]:
    """Sheet names and cell values (trailing blank cells dropped) of a workbook."""
    book = openpyxl.load_workbook(path, data_only=False)
    rows = [[_without_trailing_blanks(list(r)) for r in sheet.iter_rows(values_only=True)] for sheet in book]
    return book.sheetnames, rows


def _paragraphs(path: Path) -> list[str]:
    return [p.text for p in docx.Document(str(path)).paragraphs]


def test_fixture_files_hold_the_declared_content() -> None:
    for name, text in TEXT.items():
        assert (FILES / name).read_text() == text, name
    for name, sheets in SHEETS.items():
        names, contents = _sheets(FILES / name)
        assert names == list(sheets), name
        for rows, want in zip(contents, sheets.values(), strict=True):
            assert rows == [_without_trailing_blanks(r) for r in want], name
    for name, paragraphs in DOCS.items():
        assert _paragraphs(FILES / name) == paragraphs, name
    on_disk = {str(p.relative_to(FILES)) for p in FILES.rglob("*") if p.is_file()}
    assert on_disk == set(TEXT) | set(SHEETS) | set(DOCS)


@pytest.mark.parametrize(
    "task_id",
    [
        t.id
        for t in load_suite()
        if t.id.startswith(("mousepad-append", "mousepad-fix", "calc-", "writer-retitle"))
    ],
)
def test_input_file_fails_and_gold_passes_offline(task_id: str) -> None:
    """The metric tells the unedited input from the gold, so a fresh desktop cannot score 1."""
    task = next(t for t in load_suite() if t.id == task_id)
    call = task.evaluator.calls()[0]
    assert call.expected is not None and call.result is not None
    gold = str(task.base_dir / call.expected.params["path"])
    source = next(
        str(task.base_dir / e["local_path"])
        for s in task.config
        for e in s.parameters.get("files", [])
        if Path(e["path"]).name == Path(call.result.params["path"]).name
    )
    fn = metric(call.func).fn
    assert fn(source, gold, **call.options) == 0.0
    assert fn(gold, gold, **call.options) == 1.0


def test_suite_dir_layout() -> None:
    assert (SUITE_DIR / "test_local.json").is_file()
    for path in (SUITE_DIR / "examples").glob("*/*.json"):
        assert json.loads(path.read_text())["id"] == path.stem


def test_every_task_has_a_scripted_solution() -> None:
    from tasks_suite_solutions import SOLUTIONS

    assert set(SOLUTIONS) == {t.id for t in load_suite()}
    assert all(SOLUTIONS.values())


def test_run_records_keep_the_suite_files_reachable() -> None:
    """A run folder's task.json read back is the loaded task; its fixtures still resolve."""
    from core.trajectory import Task
    from environments.tasks.context import TaskContext, resolve_local

    for task in load_suite():
        back = Task.model_validate_json(task.model_dump_json())
        assert back.model_dump() == task.model_dump() and back.base_dir == task.base_dir
        ctx = TaskContext(task=back, cache_dir=Path("/nonexistent-cache"))
        for call in back.metric_calls():
            if call.expected is not None and call.expected.type == "cloud_file":
                assert resolve_local(ctx, call.expected.params["path"], "unused").is_file()
