"""The README's configurations with today's model names, end to end through the `agent-s3`
command against the strict local servers: a single run with a Claude policy, then the
offline critic (OS-Themis) and critic-bench on its rollout; gpt-6.1-sol guided by GUI-PRA on
itself with four candidates; a GPT-5-family policy with
GUI-PRA candidates guided by a Claude 4.5+ model, retried until a Claude OS-Themis critic
accepts;
the wide mixture with a Claude judge, then the offline re-judge (pairwise) and the sweep
with a GPT-5-family judge. Every request is one the real services accept (the strict
servers refused none), with no sampling value where the model takes none and the
anthropic-version the installed SDK sends. The offline commands reuse the desktop runs'
folders, so they add seconds, not desktops."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from runner_helpers import desktops_missing
from test_guide_desktop import TASK, _check_guided, _text, diverging_policy_and_guide
from test_wide_desktop import _solver, _wrong_item, narrator_and_judge

from contract_replies import structured
from core.llm import Script, ScriptRequest
from core.llm.profiles import default_anthropic_version
from core.trajectory import RunLayout
from gprm import PAPER_SEEDS
from testing.llm import AnthropicServer, OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-current-models-0123456789"
CLI = Path(sys.executable).with_name("agent-s3")
SAMPLING = {"temperature", "top_p", "top_k"}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY, COLUMNS="300")
    return env


async def _agent_s3(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[int, str]:
    """`agent-s3 ARGS` as a user runs it: its exit status and what it printed."""
    proc = await asyncio.create_subprocess_exec(str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def _js(**obj: object) -> str:
    return json.dumps(obj)


#: Where failure begins, which the paper's judge contract asks for with every "not_completed".
WINDOW = {"start_step": 1, "end_step": 1, "reason": "the new line is missing after step 1"}


def critics(seen: list[str], accepts: list[bool] | None = None) -> Callable[[ScriptRequest], str | None]:
    """OS-Themis's roles in the paper's reply contracts, and the LastK critic: each graded
    rollout accepted or not by the next of `accepts` (all accepted when None); `seen` gets
    each request's role. None for a request no critic sends."""

    def accepting() -> bool:
        return accepts[0] if accepts else True

    def decided(reply: str) -> str:
        if accepts:
            accepts.pop(0)
        return reply

    def reply(request: ScriptRequest) -> str | None:
        system = request.messages[0].text()
        role = next((r for marker, r in CRITIC_MARKERS if marker in system), None)
        if role is None:
            return None
        seen.append(role)
        if role == "selector" and "You choose further milestones" in system:
            return _js(done=True, reason="the edit is covered")
        if role == "selector":
            return _js(milestones=[{"step": 1, "goal": "the new line is typed", "why": "the task's edit"}],
                       reason="one edit to check")
        if role == "verifier":
            found = re.search(r"^Step: (\d+)$", request.messages[1].text(), re.M)
            assert found, "a verifier request names its step"
            step = int(found.group(1))
            return _js(step=step, verdict=int(accepting()), evidence=[f"AFTER of step {step}"],
                       feedback="" if accepting() else "the line is not there")
        if role == "reviewer":
            return _js(sound=True, concerns=[], summary="The evidence covers the edit.")
        if role == "judge" and accepting():
            return decided(_js(decision="completed", reason="The line is typed and saved.", missing=[], key_steps=[1],
                               qa={"is_qa": False}))
        if role == "judge":
            return decided(_js(decision="not_completed", failure_window=WINDOW, reason="The line is missing.",
                               missing=["the new line"], key_steps=[1], qa={"is_qa": False}))
        return decided(_js(reason="the line is there" if accepting() else "not convinced", score=int(accepting())))

    return structured(reply)


CRITIC_MARKERS = [("You choose the milestones", "selector"), ("You choose further milestones", "selector"),
                  ("You verify one milestone", "verifier"), ("You audit the evidence", "reviewer"),
                  ("You decide whether a computer-use agent completed", "judge"), ("from the last screens", "lastk")]


def critics_accepting(seen: list[str]) -> Callable[[ScriptRequest], str]:
    """Every critic request answered as accepting."""
    answer = critics(seen)

    def reply(request: ScriptRequest) -> str:
        text = answer(request)
        assert text is not None, f"not a critic request: {request.messages[0].text()[:80]!r}"
        return text

    return reply


async def test_single_run_then_the_offline_critic_and_critic_bench_pass_the_strict_servers(tmp_path: Path) -> None:
    """`agent-s3 run --task TASK --model anthropic/claude-sonnet-5-5`; then `agent-s3 critic RUN
    --critic themis` and `agent-s3 filter` with a GPT-5-family critic, `agent-s3 critic-bench`
    (themis and lastk, Claude Haiku 4.5) on the labels made from the run, and the README's
    ablation on published OGRBench data (`--option verifier=false --by platform`)."""
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    env, runs = _env(tmp_path), tmp_path / "runs"
    critic_roles: list[str] = []
    bench_roles: list[str] = []
    async with AnthropicServer(Script("single-claude", [_solver()] * 100), api_key=KEY) as claude, \
            OpenAIServer(Script("critic-gpt", [critics_accepting(critic_roles)] * 100), api_key=KEY) as gpt, \
            AnthropicServer(Script("bench-claude", [critics_accepting(bench_roles)] * 100), api_key=KEY) as bench:
        code, out = await _agent_s3(
            env, "run", "--task", TASK, "--model", "anthropic/claude-sonnet-5-5", "--base-url", claude.base_url,
            "--settle", "0.2", "--max-steps", "8", "--out", str(runs), "--run-id", "current-single", timeout=180)
        assert code == 0, out
        run = runs / "current-single"
        code, graded = await _agent_s3(env, "critic", str(run), "--critic", "themis", "--model", "openai/gpt-5.2",
                                       "--base-url", gpt.base_url)
        assert code == 0, graded
        labels = tmp_path / "labels.jsonl"
        code, made = await _agent_s3(env, "critic-bench", "--labels-from", str(run), "--write", str(labels))
        assert code == 0, made
        code, table = await _agent_s3(env, "critic-bench", str(labels), "--critic", "themis", "--critic", "lastk",
                                      "--model", "anthropic/claude-haiku-4-5", "--base-url", bench.base_url)
        assert code == 0, table
        roles_before_ablation = bench_roles.count("verifier")
        code, kept = await _agent_s3(env, "filter", str(run), "--critic", "themis", "--model", "openai/gpt-5.2",
                                     "--base-url", gpt.base_url, "--regrade", "--out", str(tmp_path / "accepted"))
        assert code == 0, kept
        published = Path(shutil.copytree(Path(__file__).parents[1] / "themis" / "data" / "ogrbench", tmp_path / "ogr"))
        code, ablated = await _agent_s3(env, "critic-bench", str(published), "--critic", "themis",
                                        "--option", "verifier=false", "--by", "platform",
                                        "--model", "anthropic/claude-haiku-4-5", "--base-url", bench.base_url)
        assert code == 0, ablated
    assert claude.refused == [] and gpt.refused == [] and bench.refused == []
    assert claude.requests and {r.body["model"] for r in claude.requests} == {"claude-sonnet-5-5"}
    assert all(not SAMPLING & set(r.body) for r in claude.requests + bench.requests)
    assert {r.headers["anthropic-version"] for r in claude.requests + bench.requests} == {default_anthropic_version()}
    assert "themis: accepted 1 of 1" in graded and "agreement with the evaluators: 1 of 1" in graded
    critic_calls = [r.body for r in gpt.requests]
    assert len(critic_calls) >= 4 and {b["model"] for b in critic_calls} == {"gpt-5.2"}
    assert all("temperature" not in b and "top_p" not in b and "max_tokens" not in b for b in critic_calls)
    verdict = json.loads(next(run.rglob("critic-themis.json")).read_text())
    assert verdict["reward"] == 1 and verdict.get("error") in (None, "") and KEY not in json.dumps(verdict)
    assert {"selector", "verifier", "judge"} <= set(critic_roles)
    assert {"selector", "verifier", "judge", "lastk"} <= set(bench_roles)
    assert all(r.body["model"] == "claude-haiku-4-5" for r in bench.requests)
    assert "themis" in table and "lastk" in table
    assert "themis: exported 1 of 1 rollouts" in kept and critic_roles.count("judge") == 2  # graded again
    assert "android" in ablated and "ubuntu" in ablated  # grouped by platform, published data as is
    assert bench_roles.count("verifier") == roles_before_ablation  # the ablation asks no verifier


async def test_guided_retry_run_with_gpt_5_family_and_claude_passes_the_strict_servers(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("agent-s3")
    if not cli.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    accepts = [False, True]
    roles: list[str] = []
    critic = critics(roles, accepts)
    guided = diverging_policy_and_guide()

    def replies(request: ScriptRequest) -> str:
        verdict = critic(request)
        return verdict if verdict is not None else guided(request)

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY, COLUMNS="300")
    async with OpenAIServer(Script("current-openai", [replies] * 300), api_key=KEY) as gpt, \
            AnthropicServer(Script("current-claude", [replies] * 300), api_key=KEY) as claude:
        proc = await asyncio.create_subprocess_exec(
            str(cli), "run", "--task", TASK, "--model", "openai/gpt-5.2", "--base-url", gpt.base_url,
            "--guide", "gprm", "--candidates", "2", "--guide-model", "anthropic/claude-sonnet-5-5",
            "-c", f"guide.model.base_url={claude.base_url}",
            "--strategy", "retry", "--attempts", "2", "--critic", "themis", "--critic-model", "anthropic/claude-haiku-4-5",
            "-c", f"critic.model.base_url={claude.base_url}", "--settle", "0.2", "--max-steps", "8",
            "--out", str(tmp_path / "runs"), "--run-id", "current-models",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=180)
    stdout = out.decode()
    assert proc.returncode == 0, stdout + err.decode()
    assert "critic ACCEPT: The line is typed and saved." in stdout and not accepts  # rejected, then accepted
    assert {"selector", "verifier", "judge"} <= set(roles)
    assert gpt.refused == [] and claude.refused == []
    policy = [r.body for r in gpt.requests]
    assert policy and all("temperature" not in b and "top_p" not in b for b in policy)  # gpt-5.x: none sent
    assert {b.get("seed") for b in policy} >= set(PAPER_SEEDS[:2])  # candidates keep their seeds
    assert {r.body["model"] for r in claude.requests} == {"claude-sonnet-5-5", "claude-haiku-4-5"}
    assert all(not {"temperature", "top_p", "top_k"} & set(r.body) for r in claude.requests)
    assert {r.headers["anthropic-version"] for r in claude.requests} == {default_anthropic_version()}
    # Each attempt is guided by its own GUI-PRA (memory and previous pick start empty), the
    # guide's calls go to its own model, and the critic decides when to stop.
    assert "retry attempt 0: done after 5 steps, score 1; critic REJECT" in stdout
    assert "retry attempt 1: done after 5 steps, score 1; critic ACCEPT" in stdout
    layout = RunLayout(tmp_path / "runs", "current-models")
    for k in (0, 1):
        traj = layout.rollout(TASK, k).read()
        _check_guided(traj, "gprm", 2)
        assert traj.steps[0].guide is not None and traj.steps[0].guide["previous"] is None
        assert traj.steps[1].guide is not None and traj.steps[1].guide["previous"]["score"] == 9.0
    scorers = [r for r in claude.requests if _text(r.body.get("system", "")).startswith("You are a process")]
    assert len(scorers) == 2 * 2 * 5 and {r.body["model"] for r in scorers} == {"claude-sonnet-5-5"}
    config_text = (layout.path / "config.json").read_text()
    config = json.loads(config_text)
    assert config["guide"]["name"] == "gprm" and config["guide"]["candidates"] == 2
    assert config["guide"]["model"]["model"] == "anthropic/claude-sonnet-5-5" and KEY not in config_text


async def test_guided_run_on_gpt_6_1_sol_with_its_own_guide_passes_the_strict_servers(tmp_path: Path) -> None:
    """`--model openai/gpt-6.1-sol --guide gprm --candidates 4`: four candidates a step told apart
    by their seeds (the model takes no temperature), scored and routed by GUI-PRA on the same
    model; the wrong candidate at step 3 loses to a right one."""
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    runs = tmp_path / "runs"
    async with OpenAIServer(Script("guided-gpt-6", [diverging_policy_and_guide()] * 300), api_key=KEY) as gpt:
        code, out = await _agent_s3(
            _env(tmp_path), "run", "--task", TASK, "--model", "openai/gpt-6.1-sol", "--base-url", gpt.base_url,
            "--guide", "gprm", "--candidates", "4", "--settle", "0.2", "--max-steps", "8",
            "--out", str(runs), "--run-id", "current-guided", timeout=180)
    assert code == 0, out
    assert gpt.refused == [] and {r.body["model"] for r in gpt.requests} == {"gpt-6.1-sol"}
    assert all(not {"temperature", "top_p", "max_tokens"} & set(r.body) for r in gpt.requests)
    assert {r.body.get("seed") for r in gpt.requests} >= set(PAPER_SEEDS[:4])
    _check_guided(RunLayout(runs, "current-guided").rollout(TASK, 0).read(), "gprm", 4)


async def test_wide_run_of_the_readme_mixture_then_rejudge_and_sweep_pass_the_strict_servers(tmp_path: Path) -> None:
    """`--mixture "openai/gpt-6.1-sol*1,anthropic/claude-opus-5-5*1" --judge bjudge` with a Claude
    judge: the rollouts' diverse sampling sends no value either model refuses, the judge picks.
    Then, offline on the run's folder, `agent-s3 judge RUN --judge pairwise` and `agent-s3 sweep`
    with a gpt-5.2 judge: the pairwise re-judge reuses the narrator's cached facts."""
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    seen: list[str] = []
    rejudged: list[str] = []
    env, runs = _env(tmp_path), tmp_path / "runs"
    async with OpenAIServer(Script("mix-gpt", [_solver()] * 100), api_key=KEY) as gpt, \
            AnthropicServer(Script("mix-claude", [_wrong_item()] * 100), api_key=KEY) as claude, \
            AnthropicServer(Script("mix-judge", [narrator_and_judge(seen)] * 100), api_key=KEY) as judge, \
            OpenAIServer(Script("offline-judge", [narrator_and_judge(rejudged)] * 100), api_key=KEY) as offline:
        mixture = tmp_path / "mixture.yaml"
        mixture.write_text(yaml.safe_dump([
            {"model": "openai/gpt-6.1-sol", "base_url": gpt.base_url},
            {"model": "anthropic/claude-opus-5-5", "base_url": claude.base_url}]))
        code, out = await _agent_s3(
            env, "run", "--task", TASK, "--model", "openai/gpt-6.1-sol", "--base-url", gpt.base_url,
            "--mixture", str(mixture), "--judge", "bjudge",
            "-c", "wide.judge_model.model=anthropic/claude-sonnet-5-5", "-c", f"wide.judge_model.base_url={judge.base_url}",
            "-c", "wide.seed=7", "--settle", "0.2", "--max-steps", "8",
            "--out", str(runs), "--run-id", "current-mixture", timeout=240,
        )  # fmt: skip
        assert code == 0, out
        run = runs / "current-mixture"
        code, again = await _agent_s3(env, "judge", str(run), "--judge", "pairwise", "--judge-model", "openai/gpt-5.2",
                                      "--base-url", offline.base_url)
        assert code == 0, again
        narrated = len(offline.requests)
        code, swept = await _agent_s3(
            env, "sweep", str(run), "--mixtures", "openai/gpt-6.1-sol*1,anthropic/claude-opus-5-5*1", "--n", "2",
            "--samples", "1", "--model", "openai/gpt-5.2", "--base-url", offline.base_url, "--out", str(tmp_path / "sweep"))
        assert code == 0, swept
    assert gpt.refused == [] and claude.refused == [] and judge.refused == [] and offline.refused == []
    assert gpt.requests and claude.requests and seen  # both rollouts ran, the judge was asked
    assert all("temperature" not in r.body for r in gpt.requests)
    assert {r.body.get("seed") for r in gpt.requests} - {None} == {7}  # rollout 0's seed, sent where accepted
    assert all(not {"temperature", "top_p"} & set(r.body) for r in claude.requests + judge.requests)
    selection = json.loads(next(run.rglob("selection.json")).read_text())
    assert selection.get("error") in (None, "")
    # The re-judge: one pairwise comparison of the two rollouts on the cached facts.
    assert "model calls: 0 narrative, 1 judge" in again and narrated == 1 and len(rejudged) >= 1
    assert '{"points": 1}' in swept and (tmp_path / "sweep" / "sweep.png").is_file()
    offline_bodies = [r.body for r in offline.requests]
    assert {b["model"] for b in offline_bodies} == {"gpt-5.2"}
    assert all(not {"temperature", "top_p", "max_tokens"} & set(b) for b in offline_bodies)
