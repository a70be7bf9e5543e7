"""The guided step without a desktop: K candidates drawn concurrently with the paper's seeds,
the guide's pick, unusable candidates left out, a guide that cannot score falling back to
the policy's first, every call of the step named once; and the guide's settings refused
in one line before anything starts."""

from __future__ import annotations

import io
import time

import pytest
from PIL import Image
from typer.testing import CliRunner

from agent_s3 import Grounder, GroundingConfig, Worker, WorkerConfig
from core.llm import ChatModel, GenerateConfig, Ledger, Reply, Sampling, Script, ScriptRequest
from gprm import PAPER_SEEDS, GuideRecord, make_guide
from runner.cli import app
from runner.config import load_run_config
from runner.guided import GuidedStep, PolicyStep, check_guide, guided_config, make_chooser

SCREEN = (1280, 720)
DELAY = 1.0
#: When each scripted call reached its model, by script name: calls made one after another
#: start at least DELAY apart, concurrent ones within moments (a test of overlap, not of speed).
STARTS: dict[str, list[float]] = {}


def _png(size: tuple[int, int] = SCREEN) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (240, 240, 240)).save(out, format="PNG")
    return out.getvalue()


def _worker(name: str, ledger: Ledger, policy: list[Reply | object], **config: object) -> Worker:
    """A worker over scripted models tagged as the runner tags a rollout's."""
    Script(name, list(policy))  # type: ignore[arg-type]
    model = ChatModel.from_name(f"scripted/{name}", ledger=ledger).with_tags(rollout=0)
    grounder = Grounder(model, GroundingConfig(space="norm1000"))
    return Worker(model, WorkerConfig(reflection=False, **config), grounder)  # type: ignore[arg-type]


def _by_seed(request: ScriptRequest) -> Reply:
    STARTS.setdefault("policy", []).append(time.perf_counter())
    seed = request.config.seed
    if seed == PAPER_SEEDS[2]:
        return Reply(text="I would rather explain than act.", delay=DELAY)  # unusable: left out
    return Reply(text=f"Seed {seed}.\n```python\nagent.wait({seed % 97})\n```", delay=DELAY)


def _score(request: ScriptRequest) -> Reply:
    STARTS.setdefault("prm", []).append(time.perf_counter())
    text = request.messages[-1].text().split("Candidate action to score:", 1)[1]
    score = 8 if f"agent.wait(seconds={float(PAPER_SEEDS[3] % 97)!r})" in text else 3
    return Reply(text=f'<eval>{{"score": {score}, "reason": "scripted"}}</eval>', delay=DELAY)


async def test_k_candidates_run_at_once_and_the_best_scored_is_chosen() -> None:
    ledger = Ledger()
    worker = _worker("guided-policy", ledger, [_by_seed] * 4, max_format_retries=0)
    Script("guided-prm", [_score] * 3)
    guide_model = ChatModel.from_name("scripted/guided-prm", ledger=ledger).with_tags(rollout=0)
    step = GuidedStep(worker, make_guide("prm", guide_model), PAPER_SEEDS[:4], model=guide_model)

    STARTS.clear()
    choice = await step.choose("Wait a little.", _png(), SCREEN, [])

    # The 4 candidates, then the 3 scores, each ran concurrently: one after another they would
    # start at least DELAY apart (3 and 2 gaps of it).
    for role, calls in (("policy", 4), ("prm", 3)):
        starts = STARTS[role]
        assert len(starts) == calls and max(starts) - min(starts) < DELAY, (role, starts)
    assert min(STARTS["prm"]) >= max(STARTS["policy"]), "scoring begins once the candidates are in"
    policy = Script.get("guided-policy").requests
    assert sorted(r.config.seed for r in policy) == sorted(PAPER_SEEDS[:4])
    assert choice.guide is not None
    record = GuideRecord.model_validate(choice.guide)
    assert [c.seed for c in record.candidates] == [PAPER_SEEDS[0], PAPER_SEEDS[1], PAPER_SEEDS[3]]
    assert [c.score for c in record.candidates] == [3.0, 3.0, 8.0] and record.chosen == 2
    assert choice.proposal.seed == PAPER_SEEDS[3] and choice.images == {}
    # Every call of the step is named once, the left-out candidate's too: four policy calls by
    # their call_id tag, three scores by record id.
    assert len(choice.call_ids) == len(set(choice.call_ids)) == len(ledger) == 7
    prm_ids = {r.id for r in ledger.records if r.module == "prm"}
    assert prm_ids <= set(choice.call_ids) and len(prm_ids) == 3
    assert {r.tags["call_id"] for r in ledger.records if r.module == "policy"} <= set(choice.call_ids)


async def test_a_guide_that_cannot_score_falls_back_to_the_policys_first() -> None:
    ledger = Ledger()
    worker = _worker("fallback-policy", ledger, [_by_seed] * 2)
    Script("fallback-prm", [Reply(text="no idea")] * 4)
    guide_model = ChatModel.from_name("scripted/fallback-prm", ledger=ledger)
    step = GuidedStep(worker, make_guide("prm", guide_model, max_reasks=1), PAPER_SEEDS[:2], model=guide_model)
    choice = await step.choose("Wait a little.", _png(), SCREEN, [])
    record = GuideRecord.model_validate(choice.guide)
    assert record.fallback and record.chosen == 0 and choice.proposal.seed == PAPER_SEEDS[0]
    assert all(c.score is None and c.attempts == 2 and c.error for c in record.candidates)
    Script.get("fallback-prm").assert_done()


def test_the_run_config_selects_the_chooser_and_the_candidates_sampling() -> None:
    plain = load_run_config([])
    assert plain.guide.name == "none" and guided_config(plain) is plain
    cfg = load_run_config([{"guide": {"name": "gprm", "candidates": 3, "options": {"max_tool_calls": 1}},
                            "worker": {"generate": {"max_tokens": 500}}}])
    decoding = guided_config(cfg).worker.generate
    assert (decoding.sampling, decoding.temperature, decoding.max_tokens) == (Sampling.diverse(0.5, 0.9, 80), None, 500)
    check_guide(cfg)
    Script("chooser-model", [])
    ledger = Ledger()
    worker = _worker("chooser-policy", ledger, [])
    guided = make_chooser(cfg, worker, ChatModel.from_name("scripted/chooser-model"))
    assert isinstance(guided, GuidedStep) and guided.seeds == list(PAPER_SEEDS[:3])
    assert guided.guide.name == "gprm" and guided.guide.router.max_calls == 1  # type: ignore[attr-defined]
    assert isinstance(make_chooser(plain, worker, None, seed=5), PolicyStep)
    assert GenerateConfig(seed=1).merged(decoding).seed == 1


@pytest.mark.parametrize(("config", "message"), [
    ({"guide": {"name": "gprm", "options": {"max_tools": 1}}},
     r"guide.options.max_tools for gprm: Extra inputs are not permitted \(its options: max_reasks, "),
    ({"guide": {"name": "gprm", "options": {"max_tool_calls": "two"}}}, "guide.options.max_tool_calls for gprm: Input should"),
    ({"guide": {"name": "prm", "candidates": 3, "seeds": [1, 1, 2]}}, "guide.candidates=3 needs as many distinct seeds"),
    ({"guide": {"name": "prm"}, "policy": {"model": "scripted/demo"}}, "a scripted policy cannot score candidates"),
    ({"guide": {"candidates": 4}}, "--candidates needs a guide to choose among them"),
    ({"guide": {"name": "prm", "pointer": {"model": "openai/molmo"}}}, "guide.pointer serves GUI-PRA's point tool"),
    ({"guide": {"name": "prm", "model": {"model": "anthropic/claude-x"}}},
     "the guide's model anthropic/claude-x needs an API key: set ANTHROPIC_API_KEY"),
])
def test_bad_guide_settings_are_refused(config: dict[str, object], message: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match=message):
        check_guide(load_run_config([config]))


@pytest.mark.parametrize(("args", "message"), [
    (["--guide", "prm", "-c", "guide.options.tools=false"],
     "error: invalid config: guide.options.tools for prm: Extra inputs are not permitted"),  # refused at load
    (["--guide", "best"], "error: invalid config: guide.name: Value error, unknown guide 'best': use one of gprm, prm or none, "
                          "or a dotted path package.module:Class of your own"),
])
def test_the_command_line_refuses_bad_guide_settings_in_one_line(args: list[str], message: str) -> None:
    done = CliRunner().invoke(app, ["run", "--task", "Type hello.", "--model", "scripted/x",
                                    "--guide-model", "scripted/guide", *args])
    assert done.exit_code == 2, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), done.output


async def test_gui_pra_points_with_its_pointing_model_and_returns_the_star() -> None:
    """GUI-PRA with no UI parser and a pointing model: routing calls the point tool, the
    pointing model answers in percentages, the star image comes back for the step."""
    ledger = Ledger()
    worker = _worker("point-policy", ledger, [_by_seed] * 2)
    route = Reply(text='{"thought": "check the button", "actions": [{"name": "point", "arguments": {"target": "the OK button"}}]}')
    done = Reply(text='{"actions": [{"name": "terminate", "arguments": {"answer": "it is there"}}]}')
    Script("point-guide", [route, done, _score, _score])
    Script("point-pointer", [Reply(text='<point x="25" y="50">the OK button</point>')])
    cfg = load_run_config([{"guide": {"name": "gprm", "candidates": 2, "options": {"parser": None}}}])
    guide_model = ChatModel.from_name("scripted/point-guide", ledger=ledger).with_tags(rollout=0)
    pointer = ChatModel.from_name("scripted/point-pointer", ledger=ledger).with_tags(rollout=0)
    chooser = make_chooser(cfg, worker, guide_model, pointer=pointer)
    choice = await chooser.choose("Press OK.", _png(), SCREEN, [])
    Script.get("point-guide").assert_done()
    Script.get("point-pointer").assert_done()
    record = GuideRecord.model_validate(choice.guide)
    assert record.routing is not None and [t.name for t in record.routing.tools] == ["point"]
    assert "pixel (320, 360)" in record.routing.tools[0].evidence
    assert set(choice.images) == {"point"} and choice.images["point"].startswith(b"\x89PNG")
    assert len(choice.call_ids) == len(ledger) == 2 + 2 + 2 + 1  # candidates, routing, scores, pointing
