"""The OSWorld export read by OSWorld's own result reader (`osworld_reader`, which follows
``show_result.py`` step by step): every task's score and every domain's average equal the
run's summary, including tasks without a pick, partial scores and unscored rollouts; the
export carries the scorer and the environment's label, and refuses another run's folder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from osworld_reader import get_result
from PIL import Image

from core.protocols import WorkerFacts
from core.trajectory import RolloutInfo, RunLayout, Step, Task, TaskResult
from environments.local.tasking import LEADERBOARD_NOTE
from environments.osworld.desktop import osworld_image_facts
from runner.comparability import record_environment
from runner.metrics import compute_metrics, write_metrics
from runner.osworld_export import ExportError, export_osworld


def _png(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 20), (shade, 20, 90)).save(out, format="PNG")
    return out.getvalue()


#: task id → (domain, per-rollout scores, selected rollout)
TASKS: dict[str, tuple[str, dict[int, float | None], int | None]] = {
    "calc-picked": ("libreoffice_calc", {0: 0.0, 1: 1.0}, 1),
    "calc-partial": ("libreoffice_calc", {0: 0.5}, None),  # one rollout: it counts without a pick
    "calc-no-pick": ("libreoffice_calc", {0: 1.0, 1: 0.0}, None),  # the judge failed: the run counts 0
    "os-unscored": ("os", {0: None}, None),  # evaluation failed: counts 0
    "os-wrong-pick": ("os", {0: 1.0, 1: 0.0, 2: 0.25}, 2),
    "chrome-one": ("chrome", {0: 1.0}, 0),
}


def _run(root: Path, run_id: str = "exp") -> RunLayout:
    layout = RunLayout(root, run_id, durable=False)
    for task_id, (_domain, scores, selected) in TASKS.items():
        task_dir = layout.task(task_id)
        task_dir.write_task(Task(id=task_id, instruction=f"do {task_id}"))
        for k, score in scores.items():
            rd = task_dir.rollout(k)
            rd.start(RolloutInfo(run_id=run_id, task_id=task_id, rollout=k, model="openai/gpt-5", started_at=1.0))
            rd.append_step(Step(index=0, thought="go", action={"kind": "click"}, code="pyautogui.click(1, 2)"),
                           {"before": _png(k), "after": _png(k + 1)})
            rd.finish("done", score=score)
        task_dir.write_result(TaskResult.from_scores(task_id, scores, selected))
    layout.task("unfinished").write_task(Task(id="unfinished", instruction="x"))
    return layout


def _check_against_summary(layout: RunLayout, root: Path, domains: dict[str, str], model: str) -> None:
    metrics = compute_metrics(layout, domains)
    write_metrics(layout, metrics)
    summary = json.loads((layout.path / "summary.json").read_text())
    read = get_result("pyautogui", model, "screenshot", str(root))
    assert read is not None
    assert set(read.scores) == set(summary["domains"])
    for domain, group in summary["domains"].items():
        assert len(read.scores[domain]) == group["tasks"]
        assert read.domain_rate(domain) == pytest.approx(group["selected"]), domain
    assert read.overall == pytest.approx(summary["overall"]["selected"])
    assert sum(len(v) for v in read.scores.values()) == summary["overall"]["tasks"]


def test_reader_sees_what_the_summary_counts(tmp_path: Path) -> None:
    layout = _run(tmp_path / "runs")
    domains = {t: d for t, (d, _, _) in TASKS.items()}
    report = export_osworld(layout, tmp_path / "results", domains=domains)
    assert set(report.written) == set(TASKS) and set(report.skipped) == {"unfinished"}
    assert report.without_trajectory == {"calc-no-pick": "no rollout was selected",
                                         "os-unscored": "rollout 0 was not scored"}
    _check_against_summary(layout, tmp_path / "results", domains, "gpt-5")
    read = get_result("pyautogui", "gpt-5", "screenshot", str(tmp_path / "results"))
    assert read is not None
    assert read.scores["libreoffice_calc"] == {"calc-picked": 1.0, "calc-partial": 0.5, "calc-no-pick": 0.0}
    assert read.scores["os"] == {"os-unscored": 0.0, "os-wrong-pick": 0.25}
    folder = report.written["os-wrong-pick"]
    assert (folder / "result.txt").read_text() == "0.25\n"  # lib_run_single's f"{result}\n"
    assert json.loads((folder / "traj.jsonl").read_text())["action"] == "pyautogui.click(1, 2)"
    assert (folder / "step_1.png").read_bytes() == _png(3)  # rollout 2's screen, the pick
    assert not (report.written["calc-no-pick"] / "traj.jsonl").exists()


def test_without_domains_the_reader_and_the_summary_agree_too(tmp_path: Path) -> None:
    layout = _run(tmp_path / "runs")
    export_osworld(layout, tmp_path / "results", model="agent-s3")
    _check_against_summary(layout, tmp_path / "results", {}, "agent-s3")


def test_a_mixture_goes_to_one_model_folder(tmp_path: Path) -> None:
    layout = _run(tmp_path / "runs", run_id="mixed")
    info = layout.task("chrome-one").rollout(0).read_info()
    assert info is not None
    layout.task("chrome-one").rollout(0).write_info(info.model_copy(update={"model": "anthropic/claude"}))
    report = export_osworld(layout, tmp_path / "results", domains={t: d for t, (d, _, _) in TASKS.items()})
    assert report.folder == tmp_path / "results" / "pyautogui" / "screenshot" / "mixed"
    _check_against_summary(layout, tmp_path / "results", {t: d for t, (d, _, _) in TASKS.items()}, "mixed")


def test_re_export_drops_stale_tasks_and_refuses_another_run(tmp_path: Path) -> None:
    layout = _run(tmp_path / "runs")
    domains = {t: d for t, (d, _, _) in TASKS.items()}
    export_osworld(layout, tmp_path / "results", domains=domains)
    moved = {**domains, "chrome-one": "os"}  # a second export with another domain for one task
    export_osworld(layout, tmp_path / "results", domains=moved)
    _check_against_summary(layout, tmp_path / "results", moved, "gpt-5")
    assert not (tmp_path / "results" / "pyautogui" / "screenshot" / "gpt-5" / "chrome").exists()
    other = _run(tmp_path / "runs", run_id="other")
    with pytest.raises(ExportError, match="holds the export of run 'exp'"):
        export_osworld(other, tmp_path / "results", domains=domains)


@pytest.mark.parametrize(("facts", "comparable"), [
    (WorkerFacts(leaderboard_note=LEADERBOARD_NOTE), False), (osworld_image_facts("ubuntu"), True)])
def test_export_and_summary_carry_the_label(tmp_path: Path, facts: WorkerFacts, comparable: bool) -> None:
    layout = _run(tmp_path / "runs")
    record_environment(layout, facts)
    write_metrics(layout, compute_metrics(layout, {}))
    report = export_osworld(layout, tmp_path / "results")
    assert report.folder is not None
    args = json.loads((report.folder / "args.json").read_text())
    summary = json.loads((layout.path / "summary.json").read_text())
    for data in (args, summary):
        assert data["scorer"] == "desktop-env 1.0.2" and data["leaderboard_comparable"] is comparable
        assert data["comparability_note"] == (None if comparable else
                                              "not leaderboard-comparable (Debian app versions, Chromium for Chrome)")
    assert args["agent_s3_run"] == "exp"
    # A run that once ran on a local desktop stays labelled when resumed on a VM.
    if not comparable:
        record_environment(layout, osworld_image_facts("ubuntu"))
        write_metrics(layout, compute_metrics(layout, {}))
        assert json.loads((layout.path / "summary.json").read_text())["leaderboard_comparable"] is False
