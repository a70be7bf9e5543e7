"""Errored tasks (a rollout's setup or scorer failed) are counted everywhere and scored nowhere:
summary.json and the table count them beside the rates, never as 0 (a domain with none scored
has no rate); the terminal summary and report.html name each one; the OSWorld export leaves
them out and says why (OSWorld's own reader then counts only scored tasks); sweeps leave
their rollouts out; the exit status says so. A hand-made run folder, values by hand."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from osworld_reader import get_result
from rich.console import Console

from core.trajectory import RolloutInfo, RunLayout, Task, TaskResult, rollout_errors
from runner.metrics import compute_metrics, format_metrics, write_metrics
from runner.osworld_export import LEFT_OUT_FILE, export_osworld
from runner.report import write_report
from runner.sweep import errored_rollouts, load_pools
from runner.task_errors import (
    EXIT_TASK_ERRORS,
    TaskLines,
    count_task_errors,
    counts_line,
    summarize_task_errors,
)

SETUP = "task {t}: setup step 0 (execute) failed: [Errno 2] No such file or directory: 'python'"
SCORING = "task {t}: getter 'gimp_config_file' (result) failed: TypeError: 'NoneType' object is not subscriptable"
#: task -> (domain, {rollout: (status, score)}, selected)
RUN: dict[str, tuple[str, dict[int, tuple[str, float | None]], int | None]] = {
    "t1": ("alpha", {0: ("done", 1.0)}, 0),
    "t2": ("alpha", {0: ("setup_failed", None)}, 0),
    "t3": ("beta", {0: ("done", 0.0), 1: ("done", 1.0)}, 1),  # judge subset, right pick
    "t4": ("beta", {0: ("done", 1.0), 1: ("scoring_failed", None)}, 0),  # would be a judge-subset task
    "t5": ("gamma", {0: ("setup_failed", None)}, None),
}
DOMAINS = {t: d for t, (d, _, _) in RUN.items()}


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path / "runs", "errs", durable=False)
    for task_id, (_, rollouts, selected) in RUN.items():
        task_dir = layout.task(task_id)
        task_dir.write_task(Task(id=task_id, instruction=f"do {task_id}"))
        for k, (status, score) in rollouts.items():
            rd = task_dir.rollout(k)
            rd.start(RolloutInfo(run_id="errs", task_id=task_id, rollout=k, model=f"openai/m{k}", started_at=1.0))
            if status == "setup_failed":
                rd.finish("setup_failed", SETUP.format(t=task_id))
            else:  # the agent's own ending is kept; a failed scorer leaves score_error
                rd.finish("done", "the agent declared the task complete")
                failed = SCORING.format(t=task_id) if status == "scoring_failed" else None
                rd.write_info(rd.read_info().model_copy(update={"score": score, "score_error": failed}))  # type: ignore[union-attr]
        task_dir.write_result(TaskResult.from_scores(task_id, {k: sc for k, (_, sc) in rollouts.items()},
                                                     selected=selected, errors=rollout_errors(task_dir.headers())))
    return layout


def test_rates_leave_errored_tasks_out_and_count_them_beside(layout: RunLayout) -> None:
    m = compute_metrics(layout, DOMAINS)
    o = m.overall
    assert (o.tasks, o.errored) == (2, 3)
    assert (o.selected, o.mean_rollout, o.pass_at_n) == pytest.approx((1.0, 0.75, 1.0))  # t1 and t3 only
    assert (o.judge_subset, o.judge_correct) == (1, 1)  # t4 errored: not in the judge subset
    data = json.loads(write_metrics(layout, m).read_text())
    gamma = data["domains"]["gamma"]
    assert (gamma["tasks"], gamma["errored"]) == (0, 1)
    assert gamma["selected"] is None and gamma["mean_rollout"] is None and gamma["pass_at_n"] is None
    table = format_metrics(m)
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:5]}
    assert rows["gamma"][:4] == ["1", "0", "1", "—"] and rows["overall"][:4] == ["5", "2", "3", "100.0"]
    assert "not counted as 0" in table


def test_the_summary_names_each_errored_task_and_asks_for_exit_4(layout: RunLayout) -> None:
    errors = count_task_errors(layout)
    assert counts_line(errors) == "tasks run 5: scored 2, errored 3 (scoring_failed 1, setup_failed 2)"
    console = Console(file=io.StringIO(), width=300)
    assert summarize_task_errors(console, layout) == EXIT_TASK_ERRORS == 4
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert f"t4 #1 scoring_failed: {SCORING.format(t='t4')}" in out
    assert f"t2 #0 setup_failed: {SETUP.format(t='t2')}" in out and "t5 #0 setup_failed" in out
    clean = RunLayout(layout.root, "clean", durable=False)
    clean.task("t1").write_task(Task(id="t1", instruction="do t1"))
    clean.task("t1").write_result(TaskResult.from_scores("t1", {0: 0.0}, selected=0))
    quiet = Console(file=io.StringIO())
    assert summarize_task_errors(quiet, clean) == 0
    assert "tasks run 1: scored 1, errored 0" in quiet.file.getvalue()  # type: ignore[attr-defined]


def test_report_html_lists_errored_tasks_and_the_benchmark_counts_them(layout: RunLayout) -> None:
    write_metrics(layout, compute_metrics(layout, DOMAINS))
    html = write_report(layout).read_text()
    errors = html[html.index('<section id="errors">'):html.index("</section>")]
    assert "errors: some tasks errored" in errors
    assert "tasks run 5: scored 2, errored 3" in errors
    assert ('<td>scoring_failed</td><td style="text-align:left">' + SCORING.format(t="t4").replace("'", "&#x27;")
            in errors)
    assert errors.count("<td>setup_failed</td>") == 2
    bench = html[html.index("<h2>benchmark</h2>"):]
    assert "<td>gamma</td><td>0</td><td>1</td><td>—</td>" in bench
    assert "3 errored tasks (setup or scorer failed) are left out of every rate" in bench
    task2 = html[html.index('id="task-t2"'):]
    assert "<b>errored</b>: no score" in task2[:2000]


def test_the_export_leaves_errored_tasks_out_and_says_why(layout: RunLayout, tmp_path: Path) -> None:
    summary = compute_metrics(layout, DOMAINS)
    report = export_osworld(layout, tmp_path / "results", domains=DOMAINS, model="m")
    assert sorted(report.written) == ["t1", "t3"] and sorted(report.errored) == ["t2", "t4", "t5"]
    assert report.errored["t4"] == f"errored, no score: rollout 1 scoring_failed: {SCORING.format(t='t4')}"
    folder = tmp_path / "results" / "pyautogui" / "screenshot" / "m"
    assert not list(folder.glob("*/t2")) and not list(folder.glob("*/t4")) and not (folder / "gamma").exists()
    left = json.loads((folder / LEFT_OUT_FILE).read_text())
    assert left["t2"] == {"domain": "alpha", "why": report.errored["t2"]} and set(left) == {"t2", "t4", "t5"}
    assert json.loads((folder / "args.json").read_text())["left_out"] == 3
    read = get_result("pyautogui", "m", "screenshot", str(tmp_path / "results"))
    assert read is not None and read.overall == summary.overall.selected == 1.0
    assert {d: len(v) for d, v in read.scores.items()} == {"alpha": 1, "beta": 1}


def test_sweeps_leave_errored_rollouts_out(layout: RunLayout) -> None:
    pools, _ = load_pools([layout])
    pooled = {(t, r.k) for t, by_model in pools.items() for rs in by_model.values() for r in rs}
    assert pooled == {("t1", 0), ("t3", 0), ("t3", 1), ("t4", 0)}
    assert errored_rollouts([layout]) == 3


def test_live_lines_say_each_error_in_one_line_with_the_counts_so_far(layout: RunLayout) -> None:
    console = Console(file=io.StringIO(), width=400)
    lines = TaskLines(console, 5)
    for task_id in ("t1", "t2", "t4"):
        result = layout.task(task_id).read_result()
        asyncio.run(lines(Task(id=task_id, instruction="x"), result))  # type: ignore[arg-type]
    asyncio.run(lines(Task(id="t9", instruction="x"), RuntimeError("a bug")))
    out = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert out[0] == "t1 selected 0 score 1, pass@1 1.0 [1/5: scored 1, errored 0]"
    assert out[1] == ("t2 setup_failed: setup step 0 (execute) failed: [Errno 2] No such file or directory: 'python' "
                      "[2/5: scored 1, errored 1]")
    assert out[2].startswith("t4 scoring_failed: getter 'gimp_config_file' (result) failed: TypeError")
    assert out[3] == "t9 crashed: a bug [4/5: scored 1, errored 2, crashed 1]"
