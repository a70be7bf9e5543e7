"""Failures per module are counted from the run's records, shown live, in the summary and
in report.html, and past the allowed share make the command exit non-zero. The run folder
is written by hand here in the on-disk format of each record (no desktop)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from runner_helpers import desktops_missing

from core.llm import CallRecord, Ledger, Reply, Script, ScriptRequest
from core.trajectory import Narrative, RolloutInfo, RunLayout, Selection, Step, Task
from runner.board import RolloutBoard
from runner.demo_policy import DEMO_PLANS, PlannedReplies
from runner.module_errors import (
    EXIT_MODULE_ERRORS,
    ErrorTally,
    count_run,
    failing_line,
    failing_modules,
    summarize_errors,
)
from runner.progress import StepPrinter
from runner.report import write_report
from runner.rollout import StepEvent
from testing.llm import OpenAIServer

GUIDE_FAILED = "gprm: the scorer's calls failed for good: openai/gpt-5: bad request (bad_request)"


def _guide(error: str | None) -> dict[str, Any]:
    return {"guide": "gprm", "chosen": 0, "fallback": error is not None, "seconds": 1.0, "error": error,
            "candidates": [{"index": 0, "seed": 30, "action": "agent.click(1)", "score": None if error else 8.0,
                            "reason": "", "error": error}]}


def _call(module: str, error: str | None = None, n: int = 0) -> CallRecord:
    return CallRecord(id=f"{module}-{n}", module=module, model="openai/gpt-5", tags={"run": "r", "task": "t1"},
                      started_at=time.time(), seconds=1.0, error=error)


def _run(tmp_path: Path, *, failing: bool = True) -> RunLayout:
    layout = RunLayout(tmp_path, "r")
    task_dir = layout.task("t1")
    task_dir.write_task(Task(id="t1", instruction="append a line"))
    for k in (0, 1):
        rd = layout.rollout("t1", k)
        rd.start(RolloutInfo(run_id="r", task_id="t1", rollout=k, model="openai/gpt-5", seed=k, started_at=time.time()))
        rd.append_step(Step(index=0, action={"kind": "done"},
                            guide=_guide(GUIDE_FAILED if failing and k == 0 else None)))
        rd.finish("done", "declared done")
        narrative = Narrative(rollout=k, facts=[["the line was added"]]).model_dump(mode="json")
        narrative["error"] = "judge: narrator call failed: HTTP 400" if failing and k == 1 else None
        task_dir.narratives_path.mkdir(exist_ok=True)
        (task_dir.narratives_path / f"rollout-{k}.json").write_text(json.dumps(narrative))
        verdict = {"critic": "themis", "model": "openai/gpt-5", "reward": None if failing and k == 0 else 1,
                   "reason": "", "error": "themis: verifier calls failed" if failing and k == 0 else None}
        (rd.path / "critic-themis.json").write_text(json.dumps(verdict))
    selection = Selection(strategy="bjudge_mcq", candidates=[0, 1], chosen=None if failing else 0).model_dump(mode="json")
    selection["error"] = "the judge's calls failed for good" if failing else None
    (task_dir.path / "selection.json").write_text(json.dumps(selection))
    ledger = Ledger(layout.ledger_path)
    ledger.append(_call("policy", n=1))
    ledger.append(_call("policy", "openai/gpt-5: bad request (bad_request)" if failing else None, n=2))
    ledger.append(_call("policy", n=3))
    ledger.append(_call("prm", "openai/gpt-5: bad request (bad_request)" if failing else None, n=4))
    return layout


def test_counts_come_from_every_modules_records(tmp_path: Path) -> None:
    tally = count_run(_run(tmp_path))
    got = {m: (c.errors, c.total) for m, c in tally.counts.items()}
    assert got == {"policy": (1, 3), "guide": (1, 2), "narrative": (1, 2), "judge": (1, 1), "critic": (1, 2)}
    assert tally.counts["guide"].first == GUIDE_FAILED
    assert tally.failed_calls == {"guide": 1}  # the ledger's cross-check, under the guide's name
    assert tally.line() == "errors: policy 1/3, guide 1/2, narrative 1/2, judge 1/1, critic 1/2; failed calls: guide 1"
    assert set(failing_modules(tally, 0.0)) == {"policy", "guide", "narrative", "judge", "critic"}
    assert set(failing_modules(tally, 0.5)) == {"judge"}  # 50% is not more than 50%
    assert "judge 1/1 (100%)" in failing_line(failing_modules(tally, 0.5), 0.5)


def test_a_clean_run_counts_records_and_no_errors(tmp_path: Path) -> None:
    tally = count_run(_run(tmp_path, failing=False))
    assert not tally.failed and tally.counts["guide"].total == 2 and tally.line() == "errors: none"
    console = Console(file=io.StringIO(), width=200)
    assert summarize_errors(console, _run(tmp_path / "again", failing=False), 0.0) == 0
    assert "errors none" in console.file.getvalue()  # type: ignore[attr-defined]


def test_summary_prints_each_failing_module_and_calls_for_exit_3(tmp_path: Path) -> None:
    layout = _run(tmp_path)
    console = Console(file=io.StringIO(), width=300)
    assert summarize_errors(console, layout, 0.0) == EXIT_MODULE_ERRORS
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "errors: policy 1/3, guide 1/2" in text and f"first: {GUIDE_FAILED}" in text
    assert "module failures over the allowed share of 0%" in text
    assert summarize_errors(Console(file=io.StringIO()), layout, 1.0) == 0


def test_report_shows_an_errors_section_and_the_failed_guide_step(tmp_path: Path) -> None:
    layout = _run(tmp_path)
    html = write_report(layout).read_text()
    section = html[html.index('<section id="errors">'):html.index("</section>")]
    assert "errors: some modules failed" in section
    for module, total in (("policy", 3), ("guide", 2), ("narrative", 2), ("judge", 1), ("critic", 2)):
        assert f"<td>{module}</td><td>{total}</td><td>1</td>" in section
    assert "verifier calls failed" in section and "from the ledger: guide 1" in section
    assert "<b>guide failed</b>: gprm: the scorer&#x27;s calls failed for good" in html
    assert "<b>narrator failed</b>: judge: narrator call failed: HTTP 400" in html
    assert "<b>failed</b>: the judge&#x27;s calls failed for good" in html
    clean = write_report(_run(tmp_path / "clean", failing=False)).read_text()
    assert "No module record says it failed" in clean and "some modules failed" not in clean
    assert "some model calls failed" not in clean


def test_refusals_spend_limits_and_cut_replies_show_as_their_own_kinds(tmp_path: Path) -> None:
    """The ledger's error kinds reach the live line, the summary and report.html: a refusal,
    a spend limit and a reply cut at the token limit are told apart from one another."""
    layout = _run(tmp_path)
    ledger = Ledger(layout.ledger_path)
    for n, (module, kind) in enumerate([("narrative", "refusal"), ("narrative", "length"), ("narrative", "refusal"),
                                        ("judge", "spend_limit"), ("policy", "content_filter")], start=10):
        ledger.append(_call(module, f"openai/gpt-5: failed ({kind})", n).model_copy(update={"error_kind": kind}))
    tally = count_run(layout)
    assert tally.kind_text("narrative") == "refusal 2, length 1" and tally.kind_text("judge") == "spend_limit 1"
    assert "narrative 1/2 (refusal 2, length 1)" in tally.line() and "judge 1/1 (spend_limit 1)" in tally.line()
    assert "policy 2/4 (content_filter 1)" in tally.line()
    console = Console(file=io.StringIO(), width=300)
    summarize_errors(console, layout, 0.0)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "narrative: 1 of 2 failed (refusal 2, length 1); first:" in text
    assert "judge: 1 of 1 failed (spend_limit 1)" in text
    section = write_report(layout).read_text().split('<section id="errors">', 1)[1].split("</section>")[0]
    assert "<th>kinds of failed calls</th>" in section
    assert '<td style="text-align:left">refusal 2, length 1</td>' in section
    assert '<td style="text-align:left">spend_limit 1</td>' in section


def _event(layout: RunLayout, k: int, error: str | None) -> StepEvent:
    step = Step(index=0, action={"kind": "done"}, guide=_guide(error))
    return StepEvent(task_id="t1", rollout=k, step=step, before=b"", after=None,
                     rollout_dir=layout.rollout("t1", k))


async def test_live_progress_counts_guide_records_and_failed_calls(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    ledger = Ledger()
    console = Console(file=io.StringIO(), width=300)
    printer = StepPrinter(console, tally=ErrorTally(), ledger=ledger)
    await printer(_event(layout, 0, None))
    ledger.append(_call("narrative", "HTTP 400", n=1))
    ledger.append(_call("prm", "HTTP 400", n=2))
    await printer(_event(layout, 0, GUIDE_FAILED))
    first, second = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert "errors" not in first
    assert second.endswith("[errors: guide 1/2; failed calls: guide 1, narrative 1]")

    board = RolloutBoard(Console(file=io.StringIO()), ledger=ledger)
    board.watch("t1", 0, "running", "openai/gpt-5", 1)
    await board.hook(_event(layout, 0, GUIDE_FAILED))
    assert str(board.table().caption) == "[red]errors: guide 1/1; failed calls: guide 1, narrative 1[/red]"


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_the_share_is_a_fraction(share: float) -> None:
    from core.config import ConfigError
    from runner.config import load_run_config

    with pytest.raises(ConfigError, match="max_module_error_share"):
        load_run_config([{"max_module_error_share": share}])


CLI = Path(sys.executable).with_name("agent-s3")


@pytest.mark.desktop
@pytest.mark.integration
async def test_cli_run_with_a_refused_model_says_so_and_exits_3(tmp_path: Path) -> None:
    """The real command on a real desktop: the policy's server refuses every request (400),
    so the policy's calls fail for good; the summary counts them, report.html shows them,
    and the command exits 3. The policy is a `vllm/` model, which has no list price: said
    once, up front."""
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    if desktops_missing() is not None:
        pytest.skip(desktops_missing() or "")
    key = "sk-module-errors-" + "k" * 16
    refused = Reply(error=400, message="Unsupported value: 'temperature' does not support 0.2 with this model.")
    script = Script("module-errors-cli", [refused] * 20)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), VLLM_API_KEY=key)
    async with OpenAIServer(script, api_key=key) as server:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", "mousepad-append-line", "--model", "vllm/qwen-vl", "--base-url", server.base_url,
            "--rollouts", "1", "--judge", "none", "-c", "wide.max_retries=0", "-c", "rollout.max_steps=3",
            "-c", "rollout.settle_seconds=0.2", "--out", str(tmp_path / "runs"), "--run-id", "refused",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=180)
    stdout = " ".join(out.decode().split())
    assert proc.returncode == EXIT_MODULE_ERRORS, stdout + err.decode()
    assert "errors: policy 1/1" in stdout and "does not support 0.2" in stdout
    assert stdout.count("no price known for vllm/qwen-vl") == 1
    assert "module failures over the allowed share of 0%: policy 1/1 (100%)" in stdout
    html = (tmp_path / "runs" / "refused" / "report.html").read_text()
    assert "errors: some modules failed" in html and "<td>policy</td><td>1</td><td>1</td>" in html
    assert key not in html


#: (module, options that put that module on the refusing server, what the summary must say);
#: the narrator's and judge's models failing in a wide run: the next test.
_REFUSED = {
    "guide": (["--guide", "gprm", "--candidates", "2", "--guide-model", "openai/guide", "--rollouts", "1",
               "--judge", "none", "-c", "guide.model.base_url={url}"], ["errors: guide 5/5"]),
    "critic": (["--strategy", "retry", "--attempts", "2", "--critic", "themis", "--critic-model", "openai/critic",
                "-c", "critic.model.base_url={url}"], ["errors: critic 2/2"]),
}


@pytest.mark.desktop
@pytest.mark.integration
@pytest.mark.parametrize("module", sorted(_REFUSED))
async def test_cli_run_whose_module_model_is_refused_exits_3(tmp_path: Path, module: str) -> None:
    """The policy solves the task (the demo plan); the guide's, narrator's and judge's, or
    critic's model answers 400 to every call: the records say so, the summary counts them
    and the command exits 3, though the task was solved."""
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    key = "sk-module-errors-" + "k" * 16
    plan = PlannedReplies(plan=list(DEMO_PLANS["mousepad-append-line"].plan))
    refused = Reply(error=400, message="Unsupported value: 'temperature' does not support 0 with this model.")
    options, expected = _REFUSED[module]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), OPENAI_API_KEY=key, COLUMNS="250")
    async with OpenAIServer(Script(f"policy-{module}", [plan] * 300), api_key=key) as policy, \
            OpenAIServer(Script(f"refused-{module}", [refused] * 300), api_key=key) as bad:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", "mousepad-append-line", "--model", "openai/policy", "--base-url", policy.base_url,
            *[o.format(url=bad.base_url) for o in options], "--settle", "0.2", "--max-steps", "8",
            "--out", str(tmp_path / "runs"), "--run-id", module,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    stdout = out.decode()
    assert proc.returncode == EXIT_MODULE_ERRORS, stdout + err.decode()
    for line in expected:
        assert line in stdout, stdout
    assert "module failures over the allowed share of 0%" in stdout and "does not support 0" in stdout


@pytest.mark.desktop
@pytest.mark.integration
async def test_cli_wide_run_tells_refusals_spend_limits_and_cut_replies_apart(tmp_path: Path) -> None:
    """`agent-s3 run --rollouts 2 --judge bjudge` on a real desktop: the narrator's model refuses
    to describe typing, answers 400 to the click, and its replies to every other step are cut
    at the token limit (also with twice the limit); the judge's account is past its spend
    limit. The task was solved, yet the command exits 3. Each failure is final
    for its call (never re-asked as a format error, never retried as a rate limit) and shows
    as its own kind in the ledger, the summary and report.html; the command exits 3."""
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    key = "sk-module-errors-" + "k" * 16
    plan = PlannedReplies(plan=list(DEMO_PLANS["mousepad-append-line"].plan))

    def narrator(request: ScriptRequest) -> Reply:
        said = "\n".join(m.text() for m in request.messages)
        if '"kind": "type"' in said:
            return Reply(refusal="I won't describe that.", finish_reason="refusal")
        if '"kind": "click"' in said:
            return Reply(error=400, message="Unsupported value: 'temperature' does not support 0 with this model.")
        return Reply(text='{"thoughts": "the screen', finish_reason="length")

    spent = Reply(error=429, code="organization_spend_limit_exceeded", message="You exceeded your spend limit.")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), OPENAI_API_KEY=key, COLUMNS="250")
    async with OpenAIServer(Script("kinds-policy", [plan] * 300), api_key=key) as policy, \
            OpenAIServer(Script("kinds-narrator", [narrator] * 300), api_key=key) as narrating, \
            OpenAIServer(Script("kinds-judge", [spent] * 300), api_key=key) as judging:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", "mousepad-append-line", "--model", "openai/policy", "--base-url", policy.base_url,
            "--rollouts", "2", "--judge", "bjudge", "-c", "wide.judge_model.model=openai/gpt-6.1-sol",
            "-c", f"wide.judge_model.base_url={judging.base_url}", "-c", "wide.narrator_model.model=openai/gpt-6.1-terra",
            "-c", f"wide.narrator_model.base_url={narrating.base_url}", "--settle", "0.2", "--max-steps", "8",
            "--out", str(tmp_path / "runs"), "--run-id", "kinds",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=300)
    stdout = " ".join(out.decode().split())
    assert proc.returncode == EXIT_MODULE_ERRORS, stdout + err.decode()
    assert len(judging.requests) == 1  # a spend limit is final: one request, no rate-limit waits
    records = Ledger.read(tmp_path / "runs" / "kinds" / "ledger.jsonl")
    kinds = {r.error_kind for r in records if r.module == "narrative" and r.error}
    assert kinds == {"refusal", "length", "bad_request"}
    assert all(r.retries == 0 for r in records if r.error_kind == "bad_request")  # a 400 is final
    assert [r.error_kind for r in records if r.module == "judge"] == ["spend_limit"]
    cut = [r for r in records if r.error_kind == "length"]
    assert all(r.retries == 0 and r.output_tokens > 0 for r in cut)  # asked twice inside one attempt, both billed
    assert "judge 1/1 (spend_limit 1)" in stdout and "refusal" in stdout and "length" in stdout
    assert "spend limit" in stdout  # the advice line
    assert "errors: narrative 2/2 (length 4, bad_request 2, refusal 2), judge 1/1 (spend_limit 1)" in stdout, stdout
    assert "module failures over the allowed share of 0%" in stdout
    html = (tmp_path / "runs" / "kinds" / "report.html").read_text()
    section = html.split('<section id="errors">', 1)[1].split("</section>")[0]
    assert "spend_limit 1" in section and "refusal" in section and "length" in section
