"""Critic metrics against hand-computed values, label and prediction files, and the bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from critic_fixtures import RUN_ID, Roles, build_rollout, js

from core.trajectory import RunLayout
from themis import (
    LabelEntry,
    bench_critic,
    labels_from_run,
    load_labels,
    load_predictions,
    make_critic,
    render_table,
    results_json,
    score,
    score_by_platform,
    score_predictions,
)

# (label, prediction, platform), counted by hand in the comments.
TRIPLES = [
    (1, 1, "ubuntu"), (1, 0, "ubuntu"), (0, 1, "ubuntu"), (0, 0, "ubuntu"), (1, 1, "ubuntu"),  # tp2 fn1 fp1 tn1
    (0, 0, "windows"), (0, 0, "windows"),  # no positives, none predicted
    (1, 0, "android"), (1, 0, "android"),  # positives, none predicted
    (0, 1, "web"),  # no positives, one predicted
]


def test_metrics_match_hand_computed_values() -> None:
    s = score_by_platform(TRIPLES)
    assert list(s) == ["overall", "android", "ubuntu", "web", "windows"]
    overall = s["overall"]
    assert (overall.tp, overall.fp, overall.tn, overall.fn, overall.n) == (2, 2, 3, 3, 10)
    assert overall.accuracy == 0.5 and overall.precision == 0.5 and overall.recall == 0.4
    assert overall.f1 == pytest.approx(4 / 9)  # 2·0.5·0.4 / 0.9
    ubuntu = s["ubuntu"]
    assert (ubuntu.accuracy, ubuntu.precision, ubuntu.recall) == (0.6, 2 / 3, 2 / 3)
    assert ubuntu.f1 == pytest.approx(2 / 3)


def test_degenerate_cases_are_defined() -> None:
    s = score_by_platform(TRIPLES)
    windows, android, web = s["windows"], s["android"], s["web"]
    # No positives and none predicted: nothing to find, nothing claimed.
    assert (windows.accuracy, windows.precision, windows.recall, windows.f1) == (1.0, None, None, None)
    # Positives but no predicted positives: precision undefined, recall and F1 zero.
    assert (android.accuracy, android.precision, android.recall, android.f1) == (0.0, None, 0.0, 0.0)
    # No positives but one predicted: precision and F1 zero, recall undefined.
    assert (web.accuracy, web.precision, web.recall, web.f1) == (0.0, 0.0, None, 0.0)
    empty = score([])
    assert (empty.n, empty.accuracy, empty.precision, empty.recall, empty.f1) == (0, None, None, None, None)
    # Papers that print 0 for undefined values.
    assert score([(0, 0)], undefined=0.0).precision == 0.0
    with pytest.raises(ValueError, match="0 or 1"):
        score([(2, 1)])


def test_table_and_json_show_undefined_values_as_such() -> None:
    labels = [LabelEntry.model_validate({"id": str(i), "label": t[0], "platform": t[2]}) for i, t in enumerate(TRIPLES)]
    result = score_predictions("judge-x", labels, {str(i): t[1] for i, t in enumerate(TRIPLES)})
    table = render_table([result])
    lines = table.splitlines()
    assert lines[0].split() == ["critic", "group", "n", "pos", "pred", "err", "miss", "acc", "prec", "rec", "f1",
                                "npv", "tnr"]
    # tp 2, fp 2, tn 3, fn 3: NPV 3/6, TNR 3/5.
    assert lines[2].split() == ["judge-x", "overall", "10", "5", "4", "0", "0", "50.0", "50.0", "40.0", "44.4",
                                "50.0", "60.0"]
    windows = next(line for line in lines if line.startswith("judge-x  windows"))
    assert windows.split()[-6:] == ["100.0", "—", "—", "—", "100.0", "100.0"]
    # One group has undefined ratios, so the macro average of those is undefined too ("dash").
    macro = next(line for line in lines if line.startswith("judge-x  macro"))
    assert macro.split()[-6:] == ["40.0", "—", "—", "—", "—", "—"]
    data = results_json([result])
    assert data["judge-x"]["scores"]["windows"]["precision"] is None  # type: ignore[index]
    json.dumps(data)


def test_prediction_files_in_both_shapes_score_the_same(tmp_path: Path) -> None:
    labels_path = tmp_path / "labels.jsonl"
    labels_path.write_text("\n".join(json.dumps({"id": f"t{i}", "label": t[0], "platform": t[2]})
                                     for i, t in enumerate(TRIPLES)) + "\n")
    labels = load_labels(labels_path)
    lines = tmp_path / "pred.jsonl"
    lines.write_text("\n".join(json.dumps({"id": f"t{i}", "prediction": bool(t[1])})
                               for i, t in enumerate(TRIPLES) if i != 4) + "\n")
    whole = tmp_path / "pred.json"
    words = ["not_completed", "completed"]
    whole.write_text(json.dumps({f"t{i}": words[t[1]] for i, t in enumerate(TRIPLES) if i != 4} | {"unlabelled": 1}))
    a = score_predictions("a", labels, load_predictions(lines))
    b = score_predictions("b", labels, load_predictions(whole))
    assert a.scores == b.scores and a.missing == b.missing == ["t4"]
    # t4 (a true positive) is missing, so it counts as rejected: tp 1, fn 4.
    assert (a.scores["overall"].tp, a.scores["overall"].fn) == (1, 4)
    assert "a: 0 errors (excluded from the metrics), 1 without prediction (counted as 0)" in render_table([a])
    assert a.unmatched == [] and b.unmatched == ["unlabelled"]
    skipped = score_predictions("s", labels, load_predictions(lines), skip_missing=True)
    assert skipped.scores["overall"].n == 9 and skipped.missing == ["t4"]


def test_bad_label_and_prediction_files_say_where(tmp_path: Path) -> None:
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"id": "a", "label": 1}\n{"id": "b", "label": 3}\n')
    with pytest.raises(ValueError, match=r"labels.jsonl:2: label"):
        load_labels(bad)
    bad.write_text('{"id": "a", "label": 1}\n{"id": "a", "label": 0}\n')
    with pytest.raises(ValueError, match="labelled twice"):
        load_labels(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_labels(tmp_path / "nope.jsonl")
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"id": "a", "prediction": 0.5}\n')
    with pytest.raises(ValueError, match="0 or 1"):
        load_predictions(pred)
    pred.write_text('{"id": "a", "reward": "success"}\n{"id": "b", "verdict": false}\n')
    assert load_predictions(pred) == {"a": 1, "b": 0}
    pred.write_text('{"id": "a", "prediction": "maybe"}\n')
    with pytest.raises(ValueError, match="not 'maybe'"):
        load_predictions(pred)
    pred.write_text('{"id": "a", "prediction": 1}\n{"oops": 1}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:2"):
        load_predictions(pred)


async def test_bench_runs_a_critic_on_labelled_rollouts(runs: Path, tmp_path: Path) -> None:
    build_rollout(runs, task_id="ok", actions=2, score=1.0, instruction="Save the report")
    build_rollout(runs, task_id="bad", actions=2, score=0.0, instruction="Delete the draft")
    labels = labels_from_run(RunLayout(runs, RUN_ID))
    assert [(e.id, e.label) for e in labels] == [(f"{RUN_ID}/bad/rollout-0", 0), (f"{RUN_ID}/ok/rollout-0", 1)]
    path = tmp_path / "labels.jsonl"
    gone = {"id": "gone", "label": 1, "platform": "ubuntu", "rollout": "runs/run-1/gone/rollout-0",
            "instruction": "x"}
    path.write_text("".join(e.model_dump_json() + "\n" for e in labels) + json.dumps(gone) + "\n")
    loaded = load_labels(path)
    assert loaded[-1].rollout == str((tmp_path / "runs/run-1/gone/rollout-0").resolve())

    def by_task(request: object) -> str:
        text = request.messages[1].text()  # type: ignore[attr-defined]
        return js(reason="looked", score=1 if "Save the report" in text else 0)

    roles = Roles({"lastk": by_task})
    model, script = roles.model(2)
    result = await bench_critic(make_critic("lastk", model), loaded, concurrency=2)
    script.assert_done()
    assert result.predictions == {f"{RUN_ID}/bad/rollout-0": 0, f"{RUN_ID}/ok/rollout-0": 1}
    assert list(result.errors) == ["gone"] and result.missing == []
    overall = result.scores["overall"]
    # "gone" could not be graded: an error, excluded from the metrics by default ...
    assert (overall.tp, overall.tn, overall.fn, overall.fp) == (1, 1, 0, 0)
    assert result.group_errors == {"ubuntu": 1}
    # ... or counted as a rejection when asked.
    strict = await bench_critic(make_critic("lastk", model), loaded, on_error="reject")
    assert (strict.scores["overall"].fn, strict.on_error) == (1, "reject")
    assert "1 errors (counted as rejections (0))" in render_table([strict])
    assert (runs / RUN_ID / "ok" / "rollout-0" / "critic-lastk.json").is_file()

    # A second bench reuses the saved verdicts: no call at all.
    again = await bench_critic(make_critic("lastk", model), loaded)
    assert again.predictions == result.predictions
