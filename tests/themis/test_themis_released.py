"""AgentRewardBench's released labels and WebJudge's released verdicts, read as they are
(a slice of the real files in tests/themis/data/agentrewardbench_release): the command
line reproduces the published rows of WebJudge's table, with no code of the user's."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli import app
from themis import LabelEntry, load_predictions, read_labels, read_released, score_predictions

RELEASE = Path(__file__).parent / "data" / "agentrewardbench_release"
ANNOTATIONS = RELEASE / "annotations.csv"
RESULTS = RELEASE / "webjudge_gpt4o" / "results.json"
LLAMA = "GenericAgent-meta-llama_Llama-3.3-70B-Instruct"
#: The scorer's display names (its get_renames) back to the annotations' values.
AGENTS = {"Claude 3.7 Sonnet": "GenericAgent-anthropic_claude-3.7-sonnet", "GPT-4o": "GenericAgent-gpt-4o-2024-11-20",
          "Llama 3.3": LLAMA, "Qwen2.5-VL": "GenericAgent-Qwen_Qwen2.5-VL-72B-Instruct", "All": "*"}
BENCHMARKS = {"AssistantBench": "assistantbench", "WorkArena": "workarena", "WorkArena++": "workarena++"}
METRICS = ("accuracy", "precision", "recall", "f1", "npv", "tnr")


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _published() -> dict[str, dict[str, float]]:
    with (RELEASE / "webjudge_gpt4o" / "metrics_test.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {f"{BENCHMARKS[r['benchmark']]}/{AGENTS[r['agent']]}": {m: float(r[m]) for m in METRICS} for r in rows}


def _bench(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "r.json"
    code, stdout, err = _invoke("critic-bench", str(ANNOTATIONS), "--predictions", str(RESULTS), "--only",
                                "split=test", "--by", "benchmark,agent", "--json", str(out), *extra)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert list(data) == ["webjudge"], stdout
    return dict(data["webjudge"], stdout=stdout)


def test_the_published_rows_are_reproduced_from_the_released_files(tmp_path: Path) -> None:
    published = _published()
    result = _bench(tmp_path, "--rounding", "agentrewardbench", "--undefined", "zero")
    # Every test trajectory of the slice is kept: AssistantBench's ids carry ".improved" in the
    # annotations and not in splits.csv, and are looked up as the scorer looks them up.
    assert "250 labelled trajectories read as agentrewardbench (left out: 3 secondary annotation); " \
           "--only split=test keeps 211" in result["stdout"]
    assert result["scores"]["overall"]["n"] == 27 * 4 + 16 + 87
    for group, row in published.items():
        assert result["figures"][group] == row, group
    assert len(published) == 7 and sum(len(r) for r in published.values()) == 42


def test_exact_rounding_differs_only_where_the_scorer_rounds_twice(tmp_path: Path) -> None:
    published = _published()
    result = _bench(tmp_path, "--undefined", "zero")
    differ = {(g, m): (result["figures"][g][m], row[m]) for g, row in published.items() for m in METRICS
              if result["figures"][g][m] != row[m]}
    # 82 of 87 right: 94.2529 %; the scorer rounds to 0.9425 first, then to 94.2.
    assert differ == {(f"workarena++/{LLAMA}", "accuracy"): (94.3, 94.2)}
    scores = result["scores"][f"workarena++/{LLAMA}"]
    assert (scores["tp"] + scores["tn"], scores["n"]) == (82, 87)


def test_workarena_plus_plus_is_its_own_benchmark_and_empty_groups_stay_out_of_averages(tmp_path: Path) -> None:
    result = _bench(tmp_path, "--undefined", "zero")
    assert result["scores"][f"workarena/{LLAMA}"]["n"] == 16 and result["scores"][f"workarena++/{LLAMA}"]["n"] == 87
    # Only Llama ran WorkArena here: the other agents' WorkArena cells are empty, printed as such.
    empty = result["empty_groups"]
    assert f"workarena/{AGENTS['GPT-4o']}" in empty and len(empty) == 6
    line = next(x for x in result["stdout"].splitlines() if x.split()[:2] == ["webjudge", f"workarena/{AGENTS['GPT-4o']}"])
    assert line.split()[2:] == ["0", "0", "0", "0", "0", "empty"]
    # The macro average is over the 6 filled cells, never a 0.0 from an empty one.
    filled = [g for g in result["leaves"] if g not in empty]
    mean = sum(result["scores"][g]["accuracy"] for g in filled) / len(filled)
    assert len(filled) == 6 and result["macro"]["accuracy"] == pytest.approx(mean)


def test_verdicts_laid_over_other_labels_are_refused_in_one_line(tmp_path: Path) -> None:
    code, _, err = _invoke("critic-bench", str(ANNOTATIONS), "--predictions", str(RESULTS), "--by", "benchmark")
    assert code == 2 and err.count("\n") == 1
    assert "27 verdicts, but the labels hold 33 trajectories" in err and "--only split=test" in err
    # One label changed: the released y_human no longer matches, and the reader says where.
    shutil.copy(RELEASE / "splits.csv", tmp_path / "splits.csv")
    tests = {e.id for e in read_labels(ANNOTATIONS).entries if (e.model_extra or {})["split"] == "test"}
    lines = ANNOTATIONS.read_bytes().split(b"\r\n")
    row = next(k for k, line in enumerate(lines) if b",Successful," in line
               and "/".join(line.decode().split(",")[i] for i in (1, 3, 2)) in tests)
    lines[row] = lines[row].replace(b",Successful,", b",Unsuccessful,")
    (tmp_path / "annotations.csv").write_bytes(b"\r\n".join(lines))
    entries = [e for e in read_labels(tmp_path / "annotations.csv").entries if (e.model_extra or {})["split"] == "test"]
    with pytest.raises(ValueError, match=r"position \d+ has y_human 1 but the labels say 0 for workarena/"):
        read_released(RESULTS, entries)


def test_a_judgment_folder_is_read_as_the_scorer_reads_each_judge(tmp_path: Path) -> None:
    labels = [LabelEntry.model_validate({"id": f"webarena/agent-a/webarena.{k}", "label": k % 2,
                                         "benchmark": "webarena", "agent": "agent-a"}) for k in range(6)]

    def judgment(judge: str, task: str, reply: str | None, reward: float = 0.0) -> None:
        folder = tmp_path / "judgments" / "webarena" / "agent-a" / judge
        folder.mkdir(parents=True, exist_ok=True)
        response = None if reply is None else {"choices": [{"message": {"role": "assistant", "content": reply}}]}
        (folder / f"{task}.json").write_text(json.dumps({
            "benchmark": "webarena", "agent": "agent-a", "judge": judge, "response": response,
            "trajectory_info": {"summary_info": {"cum_reward": reward}}}))

    judgment("webjudge", "webarena.0", "Thoughts: nothing was saved.\nStatus: failure")
    judgment("webjudge", "webarena.1", "Thoughts: done.\nStatus: success")
    # WebJudge's own reading: "success" after the first "status:", up to the next one.
    judgment("webjudge", "webarena.2", "Thoughts: the filter reads Status: Processing.\nStatus: success")
    judgment("webjudge", "webarena.3", "I think the agent did it.")  # no status: unreadable
    judgment("webjudge", "webarena.4", None)  # no response at all
    judgment("webjudge", "webarena.5(1)", "Status: success")  # a stray copy: no such task
    judgment("functional", "webarena.1", None, reward=1.0)
    judgment("gpt-4o-noaxtree", "webarena.1", "<reasoning>ok</reasoning><success>Successful</success>")
    judgment("nnetnav", "webarena.1", "Thought: it worked.\nReward: 4")
    judgment("aer", "webarena.1", "Thoughts: the filter reads Status: Processing.\nStatus: success")
    found = {r.name: r for r in read_released(tmp_path / "judgments", labels)}
    web = found["webjudge"]
    assert {k.rsplit("/", 1)[1]: v for k, v in web.predictions.items()} == {
        "webarena.0": 0, "webarena.1": 1, "webarena.2": 0, "webarena.3": None, "webarena.4": None, "webarena.5(1)": 1}
    assert "no status: in the reply" in web.errors["webarena/agent-a/webarena.3"]
    assert "no response" in web.errors["webarena/agent-a/webarena.4"]
    assert "6 judgments" in web.notes[0] and "5 of them labelled here" in web.notes[0]
    for judge in ("functional", "gpt-4o-noaxtree", "nnetnav", "aer"):
        assert found[judge].predictions == {"webarena/agent-a/webarena.1": 1}, judge
    result = score_predictions("webjudge", labels, web.predictions, errors=web.errors, on_error="reject")
    assert result.unmatched == ["webarena/agent-a/webarena.5(1)"] and len(result.errors) == 2
    assert result.missing == ["webarena/agent-a/webarena.5"]


def test_long_values_in_error_lines_are_cut(tmp_path: Path) -> None:
    pred = tmp_path / "results.json"
    pred.write_text(json.dumps({"webjudge": {"tasks": ["x" * 50_000]}}))  # not an id -> verdict file
    with pytest.raises(ValueError) as raised:
        load_predictions(pred)
    assert len(str(raised.value)) < 300 and "characters)" in str(raised.value)
    (tmp_path / "labels.jsonl").write_text(json.dumps({"id": "a", "label": 1}) + "\n")
    code, _, err = _invoke("critic-bench", str(tmp_path / "labels.jsonl"), "--predictions", str(pred))
    assert code == 2 and err.count("\n") == 1 and len(err) < 400
