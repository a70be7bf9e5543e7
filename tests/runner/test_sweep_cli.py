"""``agent-s3 sweep`` over two pools of rollouts (two models, four rollouts per task), the
narrator and the judge scripted over HTTP: the table, JSON, CSV and plot are written; the
judge (which picks a rollout that declared success) makes blind selection and minimum + gain equal pass@N; values
match hand counts; a second sweep narrates nothing (every fact is cached)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from runner_helpers import threaded_servers
from typer.testing import CliRunner

from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RolloutInfo, RunLayout, Step, Task
from runner.cli import app
from runner.demo_judge import demo_judge_reply
from runner.sweep import MixtureSpec, parse_mixtures, scaled_counts
from testing.llm import OpenAIServer

KEY = "sk-sweep-test"
#: model -> task -> scores of its four rollouts (1: the agent declared success and was right)
POOLS = {
    "alpha": {"t1": [1, 0, 0, 0], "t2": [0, 0, 0, 0], "t3": [1, 1, 1, 1]},
    "beta": {"t1": [0, 0, 0, 0], "t2": [1, 0, 1, 0], "t3": [1, 1, 0, 1]},
}


def _png(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (96, 64), (shade % 256, (3 * shade) % 256, 90)).save(out, format="PNG")
    return out.getvalue()


def _pool(root: Path, model: str) -> Path:
    layout = RunLayout(root, f"pool-{model}", durable=False)
    for t, (task_id, scores) in enumerate(POOLS[model].items()):
        layout.task(task_id).write_task(Task(id=task_id, instruction=f"Task {task_id}: type the word"))
        for k, score in enumerate(scores):
            rd = layout.rollout(task_id, k)
            rd.start(RolloutInfo(run_id=layout.run_id, task_id=task_id, rollout=k, model=f"openai/{model}",
                                 started_at=0.0))
            shade = 7 * t + 31 * k + (100 if model == "beta" else 0)
            word = "right" if score else "wrong"
            rd.append_step(Step(index=0, action={"kind": "type", "text": f"{word}-{model}-{k}"}),
                           {"before": _png(shade), "after": _png(shade + 1)})
            rd.append_step(Step(index=1, action={"kind": "done" if score else "fail"}), {"after": _png(shade + 2)})
            rd.finish("done" if score else "failed", score=float(score))
    return layout.path


@pytest.fixture
def judge_url() -> Iterator[str]:
    with threaded_servers(OpenAIServer(Script("sweep-judge", [demo_judge_reply] * 3000), api_key=KEY)) as (url,):
        yield url


def test_mixtures_parse_and_scale() -> None:
    a, b = parse_mixtures("gpt-5*5,claude*5; gpt-5*10")
    assert a == MixtureSpec((("gpt-5", 5), ("claude", 5))) and b.total == 10
    assert scaled_counts(a, 4) == [2, 2] and scaled_counts(a, 1) == [1, 0] and scaled_counts(a, 3) == [2, 1]
    assert scaled_counts(MixtureSpec((("x", 1), ("y", 2))), 6) == [2, 4]


def test_sweep_table_plot_and_cached_facts(tmp_path: Path, judge_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    runs = [str(_pool(tmp_path / "runs", m)) for m in POOLS]
    out = tmp_path / "sweep"
    args = ["sweep", *runs, "--mixtures", "alpha*2,beta*2;alpha*4", "--n", "1,2,4", "--samples", "3",
            "--model", "openai/judge", "--base-url", judge_url, "--seed", "5", "--out", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "blind %" in first.output and "min+gain %" in first.output and "alpha*2,beta*2" in first.output
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(r["mixture"], r["n"]) for r in rows] == [
        ("alpha*2,beta*2", "1"), ("alpha*2,beta*2", "2"), ("alpha*2,beta*2", "4"),
        ("alpha*4", "1"), ("alpha*4", "2"), ("alpha*4", "4")]
    points = json.loads((out / "sweep.json").read_text())["points"]
    by = {(p["mixture"], p["n"]): p for p in points}
    for p in points:  # the judge always finds the rollout that succeeded when there is one
        assert p["blind"] == pytest.approx(p["pass_at_n"]) and p["min_gain"] == pytest.approx(p["pass_at_n"])
        assert p["blind_lo"] <= p["blind"] <= p["blind_hi"] and p["tasks"] == 3
        assert p["mean_rollout"] <= p["min_gain"]
    # every alpha rollout of every task: t1 and t3 have a success, t2 none
    assert by[("alpha*4", 4)]["pass_at_n"] == pytest.approx(2 / 3)
    # alpha*2,beta*2 at N=4 is all of both pools' ... per task, 2 of each: t3 always passes,
    # t2 passes unless both beta draws are failures, t1 only with alpha's one success
    assert 1 / 3 <= by[("alpha*2,beta*2", 4)]["pass_at_n"] <= 1.0
    assert by[("alpha*4", 1)]["judge_calls"] == 0  # one rollout: nothing to judge
    assert by[("alpha*4", 4)]["judge_calls"] >= 1
    png = (out / "sweep.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    first_calls = Ledger.read(out / "ledger.jsonl")
    narrated = sum(r.module == "narrative" for r in first_calls)
    assert narrated > 0 and f"model calls: {narrated} narrative" in first.output

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    new = Ledger.read(out / "ledger.jsonl")[len(first_calls):]
    assert sum(r.module == "narrative" for r in new) == 0 and sum(r.module == "judge" for r in new) > 0
    assert "model calls: 0 narrative" in again.output
    assert json.loads((out / "sweep.json").read_text())["points"] == points  # seeded: the same numbers


def test_unknown_model_is_one_line(tmp_path: Path, judge_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = _pool(tmp_path / "runs", "alpha")
    result = CliRunner().invoke(app, ["sweep", str(run), "--mixtures", "gamma*2", "--model", "openai/judge",
                                      "--base-url", judge_url])
    assert result.exit_code == 2
    assert "no rollout of 'gamma'" in result.output and "openai/alpha" in result.output


def test_a_judge_that_fails_is_an_error_column_never_a_pick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge model that refuses every comparison: each draw that needed it is a judge error,
    left out of minimum + gain (it used to count as a pick of the first rollout); the draws
    whose rollouts all scored alike need no judge there and still count (--oracle-only: blind
    selection, which would ask the judge about t3 too, is not computed)."""

    def refusing(request: ScriptRequest) -> str | Reply:
        if request.messages[0].text().startswith("You describe what a single computer action"):
            return demo_judge_reply(request)  # the narrator answers
        return Reply(finish_reason="refusal", refusal="I can't compare these.")

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    runs = [str(_pool(tmp_path / "runs", m)) for m in POOLS]
    out = tmp_path / "sweep"
    with threaded_servers(OpenAIServer(Script("refusing-judge", [refusing] * 3000), api_key=KEY)) as (url,):
        result = CliRunner().invoke(app, ["sweep", *runs, "--mixtures", "alpha*4", "--n", "4", "--samples", "2",
                                          "--model", "openai/judge", "--base-url", url, "--out", str(out),
                                          "--oracle-only"])
    assert result.exit_code == 0, result.output
    (point,) = json.loads((out / "sweep.json").read_text())["points"]
    # t1's four alpha rollouts differ (a judge is needed: refused twice); t2 and t3 do not.
    assert point["judge_errors"] == 2 and point["tasks"] == 2
    per_task = json.loads((out / "sweep.json").read_text())["per_task"]["alpha*4@4"]
    assert per_task == {"t2": 0.0, "t3": 1.0}  # t1 is no pick of its first rollout
    assert "judge err" in result.output and "errors, not picks" in result.output
