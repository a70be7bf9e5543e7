"""Metrics of a hand-made run folder match values computed by hand: the pick's success,
mean success, pass@N, judge accuracy on the judge subset, and table 8's cost per module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.llm import CallRecord, Ledger
from core.trajectory import RolloutInfo, RunLayout, Selection, Task, TaskResult
from runner.metrics import compute_metrics, format_metrics, group_metrics, write_metrics
from runner.report import write_report

#: task -> (domain, scores per rollout, selected)
RUN = {
    "t1": ("alpha", {0: 1.0, 1: 0.0}, 0),  # judge subset, right pick
    "t2": ("alpha", {0: 0.0, 1: None}, 1),  # no success anywhere
    "t3": ("beta", {0: 1.0, 1: 1.0}, 1),  # every rollout succeeds
    "t4": ("beta", {0: 0.0, 1: 1.0}, 0),  # judge subset, wrong pick
}


def _call(n: int, module: str, task: str, dollars: float, seconds: float, rollout: int | None = None) -> CallRecord:
    tags = {"run": "r", "task": task, **({"rollout": str(rollout)} if rollout is not None else {})}
    return CallRecord(id=f"c{n}", module=module, model="openai/x", tags=tags, started_at=0.0, seconds=seconds,
                      input_tokens=100, output_tokens=50, dollars=dollars)


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path, "synthetic", durable=False)
    for task_id, (_, scores, selected) in RUN.items():
        task_dir = layout.task(task_id)
        task_dir.write_task(Task(id=task_id, instruction="do it"))
        for k, score in scores.items():
            task_dir.rollout(k).write_info(RolloutInfo(run_id="synthetic", task_id=task_id, rollout=k, model="openai/x",
                                                       status="done", started_at=100.0, ended_at=100.0 + 10 * (k + 1),
                                                       score=score))
        task_dir.write_result(TaskResult.from_scores(task_id, scores, selected=selected))
    ledger = Ledger(layout.ledger_path)
    for i, rec in enumerate([
        ("policy", "t1", 0.10, 2.0, 0), ("policy", "t1", 0.30, 4.0, 1), ("grounding", "t4", 0.02, 1.0, 0),
        ("narrative", "t1", 0.02, 1.0, None), ("narrative", "t3", 0.04, 3.0, None), ("judge", "t1", 0.01, 0.5, None),
        ("judge", "elsewhere", 9.0, 9.0, None),  # a task of no result: not counted
    ]):
        ledger.append(_call(i, rec[0], rec[1], rec[2], rec[3], rec[4]))
    return layout


def test_rates_per_domain_and_overall(layout: RunLayout) -> None:
    m = compute_metrics(layout, {t: d for t, (d, _, _) in RUN.items()})
    o = m.overall
    assert (o.tasks, m.n) == (4, 2)
    assert o.selected == pytest.approx(0.5)  # t1 1, t2 0, t3 1, t4 0
    assert o.mean_rollout == pytest.approx((0.5 + 0 + 1 + 0.5) / 4)
    assert o.pass_at_n == pytest.approx(0.75)
    assert (o.judge_subset, o.judge_correct, o.judge_accuracy) == (2, 1, 0.5)
    a, b = m.domains["alpha"], m.domains["beta"]
    assert (a.selected, a.mean_rollout, a.pass_at_n, a.judge_accuracy) == pytest.approx((0.5, 0.25, 0.5, 1.0))
    assert (b.selected, b.mean_rollout, b.pass_at_n, b.judge_accuracy) == pytest.approx((0.5, 0.75, 1.0, 0.0))


def test_cost_per_module_in_table_8_shape(layout: RunLayout) -> None:
    m = compute_metrics(layout, {t: d for t, (d, _, _) in RUN.items()})
    assert list(m.modules) == ["rollout", "policy", "grounding", "narrative", "judge"]
    policy, narrative, judge, rollout = m.modules["policy"], m.modules["narrative"], m.modules["judge"], m.modules["rollout"]
    assert (policy.calls, policy.dollars, policy.tokens, policy.seconds) == pytest.approx((2, 0.4 / 4, 300 / 4, 6.0 / 4))
    assert (narrative.dollars, narrative.seconds, narrative.median_seconds) == pytest.approx((0.015, 1.0, 0.5))
    assert (judge.calls, judge.dollars) == pytest.approx((1, 0.0025))
    # a rollout: its agent's calls (policy, grounding) over 8 rollouts; wall times 10 s and 20 s
    assert (rollout.calls, rollout.dollars, rollout.seconds, rollout.median_seconds) == pytest.approx((3, 0.42 / 8, 15.0, 15.0))


def test_summary_json_and_table(layout: RunLayout) -> None:
    m = compute_metrics(layout, {t: d for t, (d, _, _) in RUN.items()})
    data = json.loads(write_metrics(layout, m).read_text())
    assert data["overall"]["judge_accuracy"] == 0.5 and data["domains"]["beta"]["pass_at_n"] == 1.0
    assert data["modules"]["judge"]["calls"] == 1
    assert data["scorer"] == "desktop-env 1.0.2"
    table = format_metrics(m)
    assert "pass@2 %" in table and "overall" in table
    overall = next(line for line in table.splitlines() if line.startswith("overall"))
    assert overall.split()[1:] == ["4", "4", "0", "50.0", "50.0", "50.0", "75.0", "50.0", "2", "0", "0"]
    assert "min+gain: minimum + gain, oracle-filtered" in table  # run, scored, errored
    html = write_report(layout).read_text()
    section = html[html.index("<h2>benchmark</h2>"):]
    assert "<td>overall</td><td>4</td><td>0</td><td>50.0%</td><td>50.0%</td><td>50.0%</td><td>75.0%</td><td>50.0%</td>" in section
    assert "<th>minimum + gain (oracle-filtered)</th>" in section
    assert "<th>rollout</th><th>policy</th>" in section


def test_a_failed_judge_and_failed_critics_are_errors_of_their_own_never_scores(layout: RunLayout) -> None:
    """t4's judge failed for good (no pick, its selection carries the error) and two critic
    verdicts failed: the pick's rate is over the three judged tasks, t4 is no wrong pick, and
    both failures have their own column in the table, summary.json and report.html."""
    task = layout.task("t4")
    task.write_result(TaskResult.from_scores("t4", {0: 0.0, 1: 1.0}, selected=None))
    task.write_selection(Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=None, reasoning="",
                                   error="the judge gave no usable answer: refusal"))
    for k in (0, 1):
        (task.rollout(k).path / "critic-themis.json").write_text(json.dumps({"error": "spend limit", "reward": None}))
    (layout.task("t1").rollout(0).path / "critic-themis.json").write_text(json.dumps({"error": None, "reward": 1}))
    m = compute_metrics(layout, {t: d for t, (d, _, _) in RUN.items()})
    o = m.overall
    assert (o.tasks, o.judged, o.judge_errors, o.critic_errors) == (4, 3, 1, 2)
    assert o.selected == pytest.approx(2 / 3)  # t1 1, t2 0, t3 1; t4 is not a 0
    assert (o.judge_subset, o.judge_correct) == (1, 1)  # t4 is not a wrong pick
    assert o.pass_at_n == pytest.approx(0.75) and m.domains["beta"].judge_errors == 1
    data = json.loads(write_metrics(layout, m).read_text())
    assert (data["overall"]["judge_errors"], data["overall"]["critic_errors"], data["overall"]["judged"]) == (1, 2, 3)
    overall = next(line for line in format_metrics(m).splitlines() if line.startswith("overall"))
    assert overall.split()[1:] == ["4", "4", "0", "66.7", "66.7", "50.0", "75.0", "100.0", "1", "1", "2"]
    assert "a failed judge is an error, not a score of 0" in format_metrics(m)
    section = write_report(layout).read_text().split("<h2>benchmark</h2>", 1)[1]
    assert "<th>judge errors</th><th>critic errors</th>" in section
    assert "<td>overall</td><td>4</td><td>0</td><td>66.7%</td><td>66.7%</td>" in section and "<td>1</td><td>2</td></tr>" in section


def test_minimum_plus_gain_counts_agreeing_tasks_without_the_judge() -> None:
    """Blind selection scores a task the judge gave no pick 0; minimum + gain counts a task
    whose rollouts agree at their common score whatever the judge did (the evaluator chose
    not to ask it), and scores the others by the pick, like blind selection."""
    results = [
        TaskResult.from_scores("agree-no-pick", {0: 1.0, 1: 1.0, 2: 1.0}, selected=None),
        TaskResult.from_scores("agree-fail", {0: 0.0, 1: 0.0}, selected=None),
        TaskResult.from_scores("disagree-right", {0: 0.0, 1: 1.0}, selected=1),
        TaskResult.from_scores("disagree-no-pick", {0: 0.0, 1: 1.0}, selected=None),
    ]
    g = group_metrics(results)
    assert g.selected == pytest.approx(1 / 4)
    assert g.min_gain == pytest.approx(2 / 4)
    assert (g.mean_rollout, g.pass_at_n) == pytest.approx(((1 + 0 + 0.5 + 0.5) / 4, 3 / 4))
