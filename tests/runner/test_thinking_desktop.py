"""Claude 5.x thinks by default, and its thinking counts against `max_tokens`: a wide run of
Claude 5.x policies with default settings, through the `agent-s3` command on real desktops,
against strict servers that simulate that thinking (`testing.llm.thinking`). Every
call leaves room for the thinking, so no reply comes back cut; the narrator and judge (Claude
too) answer in their schemas (native structured outputs)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from runner_helpers import desktops_missing
from test_wide_desktop import TASK, _solver, _wrong_item, narrator_and_judge

from core.llm import Ledger, Script
from core.llm.limits import ANSWER_TOKENS, THINKING_ROOM
from testing.llm import AnthropicServer
from testing.llm.thinking import SIMULATED_THINKING

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-thinking-0123456789"
CLI = Path(sys.executable).with_name("agent-s3")


async def test_a_wide_run_of_claude_5_policies_with_default_settings_completes(tmp_path: Path) -> None:
    if not CLI.exists() or desktops_missing() is not None:
        pytest.skip(desktops_missing() or "the agent-s3 console script is not installed here")
    seen: list[str] = []
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), ANTHROPIC_API_KEY=KEY, COLUMNS="300")
    runs = tmp_path / "runs"
    async with AnthropicServer(Script("sonnet-5-5", [_solver()] * 100), api_key=KEY) as sonnet, \
            AnthropicServer(Script("opus-5", [_wrong_item()] * 100), api_key=KEY) as opus, \
            AnthropicServer(Script("claude-judge", [narrator_and_judge(seen)] * 100), api_key=KEY) as judge:
        mixture = tmp_path / "mixture.yaml"
        mixture.write_text(yaml.safe_dump([{"model": "anthropic/claude-sonnet-5-5", "base_url": sonnet.base_url},
                                           {"model": "anthropic/claude-opus-5", "base_url": opus.base_url}]))
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", TASK, "--model", "anthropic/claude-sonnet-5-5", "--base-url", judge.base_url,
            "--mixture", str(mixture), "--judge", "bjudge", "--settle", "0.2", "--max-steps", "8",
            "--out", str(runs), "--run-id", "claude-thinks",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    stdout = out.decode()
    assert proc.returncode == 0, stdout
    assert sonnet.refused == [] and opus.refused == [] and judge.refused == []
    assert sonnet.nonconforming == [] and judge.nonconforming == []
    policy = [r.body for r in sonnet.requests + opus.requests]
    # Default settings: no thinking parameter (the models think by default, Opus 5 and Sonnet
    # 5.5 at high), no sampling value, and a limit with room for the thinking.
    assert policy and all("thinking" not in b and not {"temperature", "top_p", "top_k"} & set(b) for b in policy)
    # (The policy's models also ground and reflect: each role has its own answer allowance.)
    room = {ANSWER_TOKENS[m] + THINKING_ROOM["high"] for m in ("policy", "grounding", "reflection", "code_agent")}
    assert {b["max_tokens"] for b in policy} <= room
    assert ANSWER_TOKENS["policy"] + THINKING_ROOM["high"] in {b["max_tokens"] for b in policy}
    assert THINKING_ROOM["high"] > SIMULATED_THINKING["high"]
    structured = [r.body for r in judge.requests]
    assert structured and all(b["output_config"]["format"]["type"] == "json_schema" for b in structured)
    records = Ledger.read(runs / "claude-thinks" / "ledger.jsonl")
    assert records and all(r.error is None and r.retries == 0 for r in records)  # nothing cut, nothing retried
    assert all(r.output_tokens >= SIMULATED_THINKING["high"] for r in records if r.module == "policy")
    selection = json.loads(next((runs / "claude-thinks").rglob("selection.json")).read_text())
    assert selection.get("error") in (None, "") and selection["chosen"] is not None and seen
    assert "errors none" in " ".join(stdout.split())
