"""Published reward data read as it is released (samples in tests/themis/data/, in each
set's published layout): labels, extra fields, left-out labels, grading with no
conversion step, and scoring from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from critic_fixtures import PAPER_NOT_QA, Roles, images_of, js, user_text
from typer.testing import CliRunner

from core.llm import Reply, Script
from runner.cli import app
from themis import (
    ThemisRecord,
    bench_critic,
    load_verdict,
    make_critic,
    read_labels,
    score_predictions,
    trace_source,
)

DATA = Path(__file__).parent / "data"


def _copy(tmp_path: Path, name: str) -> Path:
    """A writable copy (graders save verdicts beside the trajectories)."""
    return Path(shutil.copytree(DATA / name, tmp_path / name))


def test_each_published_format_is_read_with_its_fields() -> None:
    ogr = read_labels(DATA / "ogrbench")
    assert ogr.format == "ogrbench" and [(e.id, e.label, e.platform) for e in ogr.entries] == [
        ("android/contacts-add-3", 0, "android"), ("ubuntu/calc-sum-0", 1, "ubuntu")]
    assert (ogr.entries[0].model_extra or {})["source_benchmark"] == "AndroidWorld"
    osr = read_labels(DATA / "osreward" / "traces")
    assert osr.format == "osreward" and {e.id: e.label for e in osr.entries} == {
        "3b9d0c44-desk-0002": 0, "8f2c1e7a-web-0001": 1}
    assert (osr.entries[0].model_extra or {})["human_alignment"] == 0.5
    arb = read_labels(DATA / "agentrewardbench" / "annotations.csv")
    # 9 rows: one "Unsure" and one second annotation of a trajectory are left out, and said so.
    assert arb.format == "agentrewardbench" and len(arb.entries) == 7
    assert arb.skipped == {"unsure label": 1, "secondary annotation": 1}
    first = arb.entries[0]
    assert first.id == "webarena/GenericAgent-gpt-4o-2024-11-20/webarena.12" and first.label == 1  # the primary's
    assert (first.model_extra or {})["split"] == "test" and (first.model_extra or {})["benchmark"] == "webarena"
    m2w = read_labels(DATA / "mind2web" / "human_label.json")
    assert m2w.format == "mind2web" and len(m2w.entries) == 13 and m2w.skipped == {"not executable": 2}
    assert {e.id: e.label for e in m2w.entries}["SeeAct/fb7b4f784cfde003e2548fdf4e8d6b4f"] == 0


def test_bad_published_data_says_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "annotations.csv"
    bad.write_text("benchmark,model_name,task_id,trajectory_success\nwebarena,a,t1,Maybe\n")
    with pytest.raises(ValueError, match=r"annotations.csv:2: trajectory_success: label 'Maybe'"):
        read_labels(bad)
    twice = tmp_path / "human_label.json"
    twice.write_text(json.dumps([{"task_id": "t", "Operator": "1"}, {"task_id": "t", "Operator": "0"}]))
    with pytest.raises(ValueError, match="appears twice"):
        read_labels(twice)
    with pytest.raises(ValueError, match="unknown format 'csvish'"):
        read_labels(twice, "csvish")


def test_an_osreward_trace_reads_as_a_trajectory() -> None:
    source = trace_source(DATA / "osreward" / "traces" / "8f2c1e7a-web-0001.json")
    steps = list(source.iter_steps())
    # "pre" frames: a step's screenshot is before its action; the next one is after it.
    assert [(s.before_screenshot or "")[-13:] for s in steps] == ["step_0000.png", "step_0001.png", "step_0002.png"]
    assert steps[0].after_screenshot == steps[1].before_screenshot and steps[2].after_screenshot is None
    assert steps[0].action == {"name": "click_at", "x": 518, "y": 746}
    assert steps[2].action is not None and steps[2].action["name"] == "terminate"
    assert (source.read_screenshot(steps[0], "before") or b"").startswith(b"\x89PNG")


async def test_a_critic_grades_an_ogrbench_sample_with_no_conversion(tmp_path: Path) -> None:
    data = _copy(tmp_path, "ogrbench")
    labels = read_labels(data).entries

    def by_task(request: object) -> str:
        text = user_text(request)  # type: ignore[arg-type]
        return js(reason="the final screens", score=1 if "A1:A3" in text else 0)

    roles = Roles({"lastk": by_task})
    model, script = roles.model(2)
    result = await bench_critic(make_critic("lastk", model), labels, by=("platform",))
    script.assert_done()
    assert result.predictions == {"android/contacts-add-3": 0, "ubuntu/calc-sum-0": 1}
    assert result.scores["overall"].accuracy == 1.0 and set(result.scores) == {"overall", "android", "ubuntu"}
    assert result.macro["accuracy"] == 1.0
    # The last two screens were shown, read from the trajectory's own files; the verdict sits beside it.
    android = next(r for r in roles.seen["lastk"] if "Ada Lovelace" in user_text(r))
    shown = [i.data for i in images_of(android)]
    folder = data / "android" / "contacts-add-3"
    assert shown == [(folder / "screenshots" / f"step_{i}.png").read_bytes() for i in (1, 2)]
    assert "terminate" in user_text(android)  # the agent's final action is shown
    assert load_verdict(folder / "trajectory.json", "lastk") is not None


async def test_themis_grades_an_osreward_trace(tmp_path: Path) -> None:
    data = _copy(tmp_path, "osreward")
    entry = next(e for e in read_labels(data / "traces").entries if e.label == 1)
    roles = Roles({"selector_initial": [js(key_steps=[{"step_index": 1, "assessment_goal": "a tutorial page is open",
                                                       "why_important": "the url comes from it"}], rationale="r")],
                   "selector_followup": [js(need_more_steps=False, reason_to_stop="enough")],
                   "verifier": [js(step=1, verdict="success", evidence=["AFTER: tutorial page"])],
                   "reviewer": [js(issues=None, overall_commentary="none")],
                   "judge": [js(qa_answer_review=PAPER_NOT_QA, final_decision="completed", justification="Step 1 shows the page.")]})
    model, script = roles.model(5)
    result = await bench_critic(make_critic("themis", model), [entry])
    script.assert_done()
    assert result.predictions == {entry.id: 1}
    verdict = load_verdict(Path(entry.trace or ""), "themis")
    assert verdict is not None and isinstance(verdict.record, ThemisRecord)
    assert "Step 2 [terminating step" in user_text(roles.seen["selector_initial"][0])


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_critic_bench_scores_agentrewardbench_by_benchmark_and_agent(tmp_path: Path) -> None:
    labels = DATA / "agentrewardbench" / "annotations.csv"
    ids = [e.id for e in read_labels(labels).entries]
    preds = tmp_path / "judge.jsonl"
    lines = [{"id": i, "prediction": "success" if n % 2 == 0 else "failure"} for n, i in enumerate(ids[:-1])]
    lines.append({"id": "webarena/some-other-agent/webarena.99", "prediction": 1})  # matches no label
    lines.append({"id": ids[-1], "prediction": None})  # the judge failed on this one
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = _invoke("critic-bench", str(labels), "--predictions", str(preds), "--by", "benchmark,agent",
                             "--only", "split=test", "--undefined", "skip", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    assert ("7 labelled trajectories read as agentrewardbench (left out: 1 unsure label, 1 secondary annotation); "
            "--only split=test keeps 6") in out
    result = json.loads((tmp_path / "r.json").read_text())["judge"]
    # The dev-split label was filtered out by --only, so its prediction matches no label either.
    assert result["by"] == ["benchmark", "agent"] and "macro" in result and result["unmatched"] == [
        "assistantbench/GenericAgent-gpt-4o-2024-11-20/assistantbench.improved.validation.4",
        "webarena/some-other-agent/webarena.99"]
    assert len(result["errors"]) == 1 and result["scores"]["overall"]["n"] == 5
    assert any(line.split()[:2] == ["judge", "webarena/GenericAgent-gpt-4o-2024-11-20"] for line in out.splitlines())
    assert "2 predictions matching no label" in out
    # A prediction file naming one id twice is refused in one line.
    preds.write_text(json.dumps({"id": ids[0], "prediction": 1}) + "\n" + json.dumps({"id": ids[0], "prediction": 0}) + "\n")
    code, _, err = _invoke("critic-bench", str(labels), "--predictions", str(preds))
    assert code == 2 and "second prediction" in err and err.count("\n") == 1


def test_critic_bench_scores_online_mind2web_per_agent(tmp_path: Path) -> None:
    labels = read_labels(DATA / "mind2web" / "human_label.json").entries
    right = score_predictions("oracle", labels, {e.id: e.label for e in labels}, by=("agent",))
    assert right.scores["overall"].accuracy == 1.0 and len(right.scores) == 1 + 5
    preds = tmp_path / "webjudge.json"
    preds.write_text(json.dumps({e.id: 1 for e in labels}))
    code, out, err = _invoke("critic-bench", str(DATA / "mind2web" / "human_label.json"), "--predictions",
                             str(preds), "--by", "agent", "--undefined", "zero")
    assert code == 0, err
    assert "13 labelled trajectories read as mind2web (left out: 2 not executable)" in out
    assert any(line.split()[:2] == ["webjudge", "macro"] for line in out.splitlines())


def test_the_critic_command_grades_published_traces(tmp_path: Path) -> None:
    data = _copy(tmp_path, "osreward")
    Script("pub-critic", [Reply(text=js(reason="looks done", score=1)), Reply(text=js(reason="not done", score=0))])
    code, out, err = _invoke("critic", str(data / "traces"), "--critic", "lastk", "--model", "scripted/pub-critic",
                             "-j", "1")
    assert code == 0, err
    assert "accepted 1 of 2 osreward trajectories" in out and "agreement with the labels:" in out
    assert (data / "traces" / "3b9d0c44-desk-0002.critic-lastk.json").is_file()
    # The saved verdicts are not mistaken for traces on the next read.
    assert len(read_labels(data / "traces").entries) == 2

