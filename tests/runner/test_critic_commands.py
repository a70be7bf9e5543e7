"""`agent-s3 critic`, `filter` and `critic-bench` on run folders written through the on-disk
format (Pillow screenshots, evaluator scores in the headers): in-process through typer's
CliRunner with a scripted critic, and once as a subprocess talking to the critic's model over
loopback HTTP. Runs made by the runner on a real desktop are graded in test_retry_desktop."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from typer.testing import CliRunner

from core.llm import Reply, Script
from core.trajectory import RolloutInfo, RunLayout, Step, Task
from runner.cli import app
from runner.report import write_report
from testing.llm import OpenAIServer

CLI = Path(sys.executable).with_name("agent-s3")
KEY = "sk-critic-cmd-" + "k" * 16
RUN = "graded-1"


def _png(label: str, colour: str) -> bytes:
    img = Image.new("RGB", (320, 200), colour)
    ImageDraw.Draw(img).text((10, 90), label, fill="black")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _rollout(layout: RunLayout, task: Task, k: int, *, score: float | None, status: str = "done") -> None:
    task_dir = layout.task(task.id)
    task_dir.write_task(task)
    rd = task_dir.rollout(k)
    rd.start(RolloutInfo(run_id=layout.run_id, task_id=task.id, rollout=k, model="openai/policy", started_at=time.time()))
    rd.append_step(Step(index=0, thought="I open the file", action={"kind": "click", "element_description": "file"}),
                   {"before": _png(f"{task.id} {k} start", "white"), "after": _png(f"{task.id} {k} open", "lightblue")})
    if status == "running":
        return
    rd.append_step(Step(index=1, thought="Finished.", action={"kind": "done"}), {"before": _png("end", "lightblue")})
    rd.finish(status, "the agent declared the task complete", score=score)  # type: ignore[arg-type]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run: task-a (ubuntu) rollouts scored 1 and 0, task-b (windows) scored 1, and a
    rollout still running (never graded)."""
    layout = RunLayout(tmp_path / "runs", RUN, durable=False)
    layout.path.mkdir(parents=True)
    layout.write_config({"policy": {"model": "openai/policy-model", "base_url": None}})
    a = Task(id="task-a", instruction="Save the notes as notes.txt")
    b = Task(id="task-b", instruction="Rename the folder to archive", platform="windows")
    _rollout(layout, a, 0, score=1.0)
    _rollout(layout, a, 1, score=0.0)
    _rollout(layout, b, 0, score=1.0)
    _rollout(layout, b, 1, score=None, status="running")
    return layout.path


def _lastk(name: str, rewards: list[int]) -> Script:
    return Script(name, [Reply(text=json.dumps({"reason": f"reply {i} says {r}", "score": r}))
                         for i, r in enumerate(rewards)])


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_critic_grades_every_finished_rollout_and_reports_agreement(run_dir: Path) -> None:
    script = _lastk("cmd-critic", [1, 0, 0])  # a/0 agrees (1=1), a/1 agrees (0=0), b/0 does not (0≠1)
    code, out, err = _invoke("critic", str(run_dir), "--critic", "lastk", "--model", "scripted/cmd-critic", "-j", "1")

    assert code == 0, err
    script.assert_done()
    rows = [line.split(None, 3) for line in out.splitlines()[1:4]]
    assert rows == [["task-a/rollout-0", "1", "1", "reply 0 says 1"], ["task-a/rollout-1", "0", "0", "reply 1 says 0"],
                    ["task-b/rollout-0", "1", "0", "reply 2 says 0"]]
    assert "lastk: accepted 1 of 3" in out
    assert "agreement with the evaluators: 2 of 3 (66.7%)" in out
    saved = json.loads((run_dir / "task-b" / "rollout-0" / "critic-lastk.json").read_text())
    assert saved["reward"] == 0 and saved["record"]["kind"] == "lastk" and saved["model"] == "scripted/cmd-critic"
    assert not (run_dir / "task-b" / "rollout-1" / "critic-lastk.json").exists()
    ledger = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    assert [r["module"] for r in ledger] == ["critic"] * 3 and {r["tags"]["run"] for r in ledger} == {RUN}
    # The run's report shows each deliberation beside its rollout.
    page = RunLayout(run_dir.parent, RUN)
    html = write_report(page).read_text()
    assert html.count('<details class="critic">') == 3
    assert "<b>critic</b> lastk (scripted/cmd-critic): REJECT after 1 calls in 0.0s: reply 2 says 0" in html
    assert "frames: the screen before the first step; the screen after step 0" in html


def test_filter_exports_the_accepted_rollouts_as_a_run(run_dir: Path, tmp_path: Path) -> None:
    script = _lastk("filter-critic", [1, 0, 1])
    out_dir = tmp_path / "accepted"
    code, out, err = _invoke("filter", str(run_dir), "--critic", "lastk", "--model", "scripted/filter-critic",
                             "--out", str(out_dir), "-j", "1")

    assert code == 0, err
    script.assert_done()
    assert f"lastk: exported 2 of 3 rollouts to {out_dir}" in out
    exported = RunLayout(tmp_path, "accepted")
    assert exported.task_ids() == ["task-a", "task-b"]
    assert exported.task("task-a").rollout_indices() == [0] and exported.task("task-b").rollout_indices() == [0]
    assert exported.task("task-a").read_task() == RunLayout(run_dir.parent, RUN).task("task-a").read_task()
    trajectory = exported.rollout("task-b", 0).read()
    assert trajectory.info.score == 1.0 and len(trajectory.steps) == 2
    assert json.loads((out_dir / "task-b" / "rollout-0" / "critic-lastk.json").read_text())["reward"] == 1
    assert json.loads((out_dir / "config.json").read_text())["policy"]["model"] == "openai/policy-model"
    # A second filter reuses the saved verdicts: no call at all.
    _lastk("filter-critic", [])
    code, out, err = _invoke("filter", str(run_dir), "--critic", "lastk", "--model", "scripted/filter-critic",
                             "--out", str(tmp_path / "again"))
    assert code == 0, err
    assert "lastk: exported 2 of 3" in out


def _labels(path: Path, rows: list[tuple[str, int, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "label": y, "platform": p}) + "\n" for i, y, p in rows))
    return path


def test_critic_bench_metrics_match_hand_computed_values(tmp_path: Path) -> None:
    labels = _labels(tmp_path / "labels.jsonl", [
        ("u1", 1, "ubuntu"), ("u2", 1, "ubuntu"), ("u3", 0, "ubuntu"), ("u4", 0, "ubuntu"), ("u5", 1, "ubuntu"),
        ("w1", 0, "windows"), ("w2", 0, "windows"), ("w3", 0, "windows"),
    ])
    # u2 has no prediction: it counts as rejected (0) and is listed as missing.
    (tmp_path / "judge.jsonl").write_text("".join(json.dumps(o) + "\n" for o in [
        {"id": "u1", "prediction": 1}, {"id": "u3", "verdict": "not_completed"}, {"id": "u4", "reward": True},
        {"id": "u5", "prediction": "completed"}, {"id": "w1", "prediction": 0}, {"id": "w2", "prediction": 0},
        {"id": "w3", "prediction": False}, {"id": "unlabelled", "prediction": 1},
    ]))
    (tmp_path / "never.json").write_text(json.dumps({"u1": 0, "u2": 0, "u3": 0, "u4": 0, "u5": 0}))
    out_json = tmp_path / "bench.json"
    code, out, err = _invoke("critic-bench", str(labels), "--predictions", str(tmp_path / "judge.jsonl"),
                             "--predictions", str(tmp_path / "never.json"), "--json", str(out_json))

    assert code == 0, err
    results = json.loads(out_json.read_text())
    judge = results["judge"]["scores"]
    # ubuntu: tp=2 (u1,u5) fn=1 (u2) fp=1 (u4) tn=1 (u3)
    assert (judge["ubuntu"]["tp"], judge["ubuntu"]["fn"], judge["ubuntu"]["fp"], judge["ubuntu"]["tn"]) == (2, 1, 1, 1)
    assert judge["ubuntu"]["accuracy"] == pytest.approx(3 / 5)
    assert judge["ubuntu"]["precision"] == pytest.approx(2 / 3) and judge["ubuntu"]["recall"] == pytest.approx(2 / 3)
    assert judge["ubuntu"]["f1"] == pytest.approx(2 / 3)
    # windows: no positives and nothing accepted: accuracy 1, the rest undefined.
    assert judge["windows"]["accuracy"] == 1.0
    assert judge["windows"]["precision"] is None and judge["windows"]["recall"] is None and judge["windows"]["f1"] is None
    # overall: tp=2 fp=1 fn=1 tn=4
    assert judge["overall"]["accuracy"] == pytest.approx(6 / 8) and judge["overall"]["f1"] == pytest.approx(2 / 3)
    assert results["judge"]["missing"] == ["u2"] and "unlabelled" not in results["judge"]["predictions"]
    # A judge that never accepts: precision undefined, recall and F1 zero.
    never = results["never"]["scores"]["overall"]
    assert never["precision"] is None and never["recall"] == 0.0 and never["f1"] == 0.0
    assert never["accuracy"] == pytest.approx(5 / 8)
    table = out.splitlines()
    assert table[0].split() == ["critic", "group", "n", "pos", "pred", "err", "miss", "acc", "prec", "rec", "f1",
                                "npv", "tnr"]
    # NPV: tn 4 of the 5 rejected; TNR: tn 4 of the 5 failures.
    assert ["judge", "overall", "8", "3", "3", "0", "1", "75.0", "66.7", "66.7", "66.7", "80.0", "80.0"] in [
        line.split() for line in table]
    assert any(line.split()[:2] == ["judge", "windows"] and line.split()[-5:] == ["—", "—", "—", "100.0", "100.0"]
               for line in table)
    assert "judge: 0 errors (excluded from the metrics), 1 without prediction (counted as 0)" in out


def test_labels_from_a_run_then_a_critic_bench_on_them(run_dir: Path, tmp_path: Path) -> None:
    labels = tmp_path / "from-run.jsonl"
    code, out, err = _invoke("critic-bench", "--labels-from", str(run_dir), "--write", str(labels))
    assert code == 0, err
    assert f"3 labels (2 successes) written to {labels}" in out
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [(r["id"], r["label"], r["platform"]) for r in rows] == [
        (f"{RUN}/task-a/rollout-0", 1, "ubuntu"), (f"{RUN}/task-a/rollout-1", 0, "ubuntu"),
        (f"{RUN}/task-b/rollout-0", 1, "windows")]
    script = _lastk("bench-critic", [1, 1, 0])  # a/0 tp, a/1 fp, b/0 fn
    code, out, err = _invoke("critic-bench", str(labels), "--critic", "lastk", "--model", "scripted/bench-critic",
                             "-j", "1", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    script.assert_done()
    scores = json.loads((tmp_path / "r.json").read_text())["lastk"]["scores"]
    assert (scores["overall"]["tp"], scores["overall"]["fp"], scores["overall"]["fn"]) == (1, 1, 1)
    assert scores["overall"]["f1"] == pytest.approx(0.5) and scores["windows"]["recall"] == 0.0
    assert (run_dir / "task-a" / "rollout-1" / "critic-lastk.json").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["critic", "{tmp}/no-such-run"], "no-such-run is not a run folder"),
    (["filter", "{tmp}/no-such-run", "--out", "{tmp}/x"], "no-such-run is not a run folder"),
    (["critic", "{run}", "--critic", "oracle", "--model", "scripted/x"], "unknown critic 'oracle'"),
    (["critic", "{run}", "--critic", "lastk", "--model", "scripted/never-registered"], "no script named"),
    (["critic", "{run}", "--critic", "lastk", "--model", "openai/gpt-5"], "needs an API key: set OPENAI_API_KEY"),
    (["filter", "{run}", "--model", "scripted/x", "--out", "{run}/inside"], "is inside the run folder"),
    (["critic-bench", "{tmp}/missing.jsonl", "--predictions", "{tmp}/p.jsonl"], "missing.jsonl does not exist"),
    (["critic-bench", "{tmp}/bad.jsonl", "--predictions", "{tmp}/p.jsonl"], "bad.jsonl:2: label"),
    (["critic-bench", "{tmp}/good.jsonl", "--predictions", "{tmp}/badp.jsonl"], "badp.jsonl:1: expected"),
    (["critic-bench", "{tmp}/good.jsonl", "--critic", "lastk"], "--model provider/model"),
    (["critic-bench", "{tmp}/good.jsonl"], "name a critic with --critic"),
    (["critic-bench"], "give a labels file"),
])
def test_bad_input_ends_in_one_clear_line(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          args: list[str], expected: str) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "good.jsonl").write_text('{"id": "t1", "label": 1}\n')
    (tmp_path / "bad.jsonl").write_text('{"id": "t1", "label": 1}\n{"id": "t2", "label": "maybe"}\n')
    (tmp_path / "badp.jsonl").write_text('{"id": "t1"}\n')
    (tmp_path / "p.jsonl").write_text('{"id": "t1", "prediction": 1}\n')
    Script("x", [])  # registered, and never called: the command stops first
    filled = [a.replace("{tmp}", str(tmp_path)).replace("{run}", str(run_dir)) for a in args]
    code, _, err = _invoke(*filled)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err


async def test_critic_as_a_subprocess_over_http(run_dir: Path, tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    replies = [Reply(text=json.dumps({"reason": "the last screen shows it", "score": 1}))] * 3
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_API_KEY"] = KEY
    async with OpenAIServer(Script("cmd-http", replies), api_key=KEY) as server:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "critic", str(run_dir), "--critic", "lastk", "--model", "openai/critic-model",
            "--base-url", server.base_url, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 0, err.decode()
        assert len(server.requests) == 3 and all(r.credential == KEY for r in server.requests)
    stdout = out.decode()
    assert "lastk: accepted 3 of 3" in stdout and "agreement with the evaluators: 2 of 3 (66.7%)" in stdout
    files = await asyncio.to_thread(lambda: [p.read_bytes() for p in run_dir.rglob("*") if p.is_file()])
    assert KEY not in stdout and not any(KEY.encode() in data for data in files)
    saved = json.loads((run_dir / "task-a" / "rollout-1" / "critic-lastk.json").read_text())
    assert saved["model"] == "openai/critic-model" and saved["reward"] == 1


def test_critic_options_from_the_command_line_and_a_yaml_file(run_dir: Path, tmp_path: Path) -> None:
    Script("opt-critic", [Reply(text=json.dumps({"reason": f"r{i}", "score": i % 2})) for i in range(6)])
    options = tmp_path / "critic.yaml"
    options.write_text("samples: 2\nvote: all\n")
    code, _, err = _invoke("critic", str(run_dir), "--critic", "lastk", "--model", "scripted/opt-critic",
                             "--options", str(options), "--option", "vote=any", "--option", "k=1")
    assert code == 0, err
    saved = json.loads((run_dir / "task-a" / "rollout-0" / "critic-lastk.json").read_text())
    assert (saved["options"]["samples"], saved["options"]["vote"], saved["options"]["k"]) == (2, "any", 1)
    code, _, err = _invoke("critic", str(run_dir), "--critic", "lastk", "--model", "scripted/opt-critic",
                           "--option", "votes=3")
    assert code == 2 and err.count("\n") == 1 and "unknown config key 'votes'" in err
    code, _, err = _invoke("critic", str(run_dir), "--critic", "themis", "--model", "scripted/opt-critic",
                           "--option", "verifier")
    assert code == 2 and "write key=value" in err


def test_critic_bench_counts_a_failing_critic_as_errors_not_zeros(run_dir: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    assert _invoke("critic-bench", "--labels-from", str(run_dir), "--write", str(labels))[0] == 0
    # The first rollout's critic never answers in JSON (3 attempts); the other two do.
    Script("flaky", [Reply(text="I think so.")] * 3 + [Reply(text=json.dumps({"reason": "ok", "score": 1}))] * 2)
    code, out, err = _invoke("critic-bench", str(labels), "--critic", "lastk", "--model", "scripted/flaky",
                             "--option", "k=1", "-j", "1", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    name = "lastk[k=1]"  # the row names the options that differ from the defaults
    result = json.loads((tmp_path / "r.json").read_text())[name]
    assert list(result["errors"]) == [f"{RUN}/task-a/rollout-0"] and result["on_error"] == "exclude"
    assert result["scores"]["overall"]["n"] == 2
    assert f"{name}: 1 errors (excluded from the metrics)" in out
    # A rerun asks again about the errored rollout only; now it answers, and is scored.
    Script("flaky", [Reply(text=json.dumps({"reason": "no", "score": 0}))])
    code, out, err = _invoke("critic-bench", str(labels), "--critic", "lastk", "--model", "scripted/flaky",
                             "--option", "k=1", "--errors", "reject", "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    again = json.loads((tmp_path / "r.json").read_text())[name]
    assert again["errors"] == {} and again["scores"]["overall"]["n"] == 3 and again["on_error"] == "reject"
