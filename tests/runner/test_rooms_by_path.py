"""A judge, a critic and a step guide written outside the project, named by dotted path, run through the
command line: ``run --strategy wide --judge``, ``judge --judge``, ``run --strategy retry
--critic``, ``critic-bench --critic`` and ``run --guide`` take ``package.module:Class`` wherever they take a registered name,
and nothing of agent-s3 is edited to add them (the module lives in a temporary folder on
``sys.path``). The registries' names are what the help texts and the errors list."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import flatten, module_elsewhere
from test_critic_commands import run_dir  # noqa: F401  (a fixture: a graded run on disk)
from test_environment_kinds import paper_kind  # noqa: F401  (a fixture: an in-memory environment kind)
from typer.testing import CliRunner

from bjudge import JUDGES
from core.llm import PROVIDERS, Reply, Script, ScriptRequest
from core.trajectory import RunLayout
from gprm import GUIDES, PAPER_SEEDS
from runner.cli import app
from runner.demo_judge import register_demo_judge
from runner.demo_policy import PlannedReplies, action_reply, role_of
from themis import CRITICS, load_verdict

#: What a user writes to add a judge and a critic of their own: a module of their own.
ROOMS = '''
"""A judge, a critic and a step guide of a user's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from core.llm import ChatMessage, ChatModel, GenerateConfig, ModelAPI, ModelOutput
from core.trajectory import Selection
from gprm import CandidateScore, GuideDecision, GuideRecord
from themis import OtherRecord, Verdict


class LongestStoryJudge:
    """Picks the rollout whose narrative says most (the later one on a tie)."""

    name = "longest-story"

    def __init__(self, model: ChatModel, cfg: Any = None) -> None:
        self.model = model

    async def __call__(self, task: str, candidates: Sequence[Any]) -> Selection:
        best = max(candidates, key=lambda c: (len(c.text()), c.rollout))
        return Selection(strategy=self.name, candidates=[c.rollout for c in candidates], chosen=best.rollout,
                         reasoning=f"rollout {best.rollout} told the longest story", model=self.model.name)


class WordOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    word: str = "ACCEPT"


class OneWordCritic:
    """Asks its model for one word and accepts the rollout when the word is `word`."""

    name = "one-word"
    Options: ClassVar[type[BaseModel]] = WordOptions

    def __init__(self, model: ChatModel, options: WordOptions) -> None:
        self.model = model
        self.options = options

    async def __call__(self, task: Any, rollout: Any) -> Verdict:
        steps = sum(1 for _ in rollout.iter_steps())
        instruction = getattr(task, "instruction", task)
        out = await self.model.generate(
            [ChatMessage(role="user", content=f"{instruction} ({steps} steps). One word: ACCEPT or REJECT?")],
            module="critic")
        said = out.text.strip()
        return Verdict(critic=self.name, model=self.model.name, reward=1 if said == self.options.word else 0,
                       reason=f"the model said {said}", options=self.options.model_dump(), calls=1,
                       record=OtherRecord(kind=self.name, notes=[f"{steps} steps; reply {said}"]))


class EndOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pick: Literal["first", "last"] = "last"


class EndGuide:
    """A step guide that takes the policy's first or last candidate, unscored."""

    name = "end-guide"
    Options: ClassVar[type[BaseModel]] = EndOptions

    def __init__(self, model: ChatModel, *, pick: str = "last") -> None:
        self.pick = pick

    async def choose(self, goal: str, screenshot: bytes, history: list[Any], candidates: list[Any]) -> GuideDecision:
        index = len(candidates) - 1 if self.pick == "last" else 0
        scores = [CandidateScore(index=k, action=c.action, seed=c.seed) for k, c in enumerate(candidates)]
        return GuideDecision(index, candidates[index], GuideRecord(guide=self.name, chosen=index, candidates=scores))

    def reset(self) -> None:
        return None


class DoneAPI(ModelAPI):
    """A model provider that always answers that the task is done (a policy reply)."""

    provider = "always-done"

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        return ModelOutput(text="Nothing is left to do.\\n```python\\nagent.done()\\n```", model=self.name)
'''

JUDGE = "my_rooms:LongestStoryJudge"
CRITIC = "my_rooms:OneWordCritic"
GUIDE = "my_rooms:EndGuide"


@pytest.fixture
def rooms(tmp_path: Path) -> Iterator[Path]:
    # classes named by path are registered under their names: unregistered afterwards
    with module_elsewhere(tmp_path / "elsewhere", "my_rooms", ROOMS, (JUDGES, "longest-story"), (CRITICS, "one-word"), (GUIDES, "end-guide")) as folder:
        yield folder


def _paper_policy(name: str) -> None:
    Script(name, [PlannedReplies(plan=[action_reply("I press Enter.", 'agent.hotkey(["enter"])'),
                                       action_reply("Done.", "agent.done()")])] * 40)


def _run(tmp_path: Path, run_id: str, *args: str) -> str:
    result = CliRunner().invoke(app, [
        "run", "--env", "paper", "--task", "Press Enter once", "--model", "scripted/paper-rooms",
        "--out", str(tmp_path / "runs"), "--run-id", run_id, *args,
    ], env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 0, result.output
    return flatten(result.output)


def test_a_critic_by_dotted_path_runs_the_retry_strategy(paper_kind: object, rooms: Path, tmp_path: Path) -> None:  # noqa: F811
    _paper_policy("paper-rooms")
    critic = Script("word-critic", [Reply(text="REJECT"), Reply(text="ACCEPT")])
    out = _run(tmp_path, "retry-rooms", "--strategy", "retry", "--critic", CRITIC, "--critic-model",
               "scripted/word-critic", "--attempts", "3")
    critic.assert_done()
    assert len(critic.requests) == 2 and "Press Enter once (2 steps)" in critic.requests[0].messages[0].text()
    assert "attempt 0: done after 2 steps, score none; critic REJECT: the model said REJECT" in out
    assert "attempt 1: done after 2 steps, score none; critic ACCEPT: the model said ACCEPT" in out
    task = next(p for p in RunLayout(tmp_path / "runs", "retry-rooms").path.iterdir() if p.is_dir() and
                (p / "rollout-0").is_dir())
    first, second = load_verdict(task / "rollout-0", "one-word"), load_verdict(task / "rollout-1", "one-word")
    assert first is not None and first.reward == 0 and first.record.kind == "one-word"  # type: ignore[union-attr]
    assert second is not None and second.reward == 1 and second.reason == "the model said ACCEPT"
    assert not (task / "rollout-2").exists()  # accepted at the second attempt
    config = json.loads((task.parent / "config.json").read_text())
    assert config["critic"]["name"] == CRITIC


def test_a_judge_by_dotted_path_picks_among_wide_rollouts(paper_kind: object, rooms: Path, tmp_path: Path) -> None:  # noqa: F811
    _paper_policy("paper-rooms")
    narrator = register_demo_judge()  # the narrator's replies; the judge of my_rooms calls no model
    _run(tmp_path, "wide-rooms", "--strategy", "wide", "--rollouts", "2", "--judge", JUDGE,
         "--judge-model", narrator)
    layout = RunLayout(tmp_path / "runs", "wide-rooms")
    task = next(p for p in layout.path.iterdir() if p.is_dir() and (p / "rollout-0").is_dir())
    selection = json.loads((task / "selection.json").read_text())
    assert selection["strategy"] == "longest-story" and selection["candidates"] == [0, 1]
    assert selection["chosen"] == 1 and selection["reasoning"] == "rollout 1 told the longest story"

    # Rollouts run with no judge, then judged offline by the same class named by path.
    _run(tmp_path, "wide-later", "--strategy", "wide", "--rollouts", "2", "--judge", "none", "--judge-model", narrator)
    later = RunLayout(tmp_path / "runs", "wide-later")
    task = next(p for p in later.path.iterdir() if p.is_dir() and (p / "rollout-0").is_dir())
    assert not (task / "selection.json").exists()
    judged = CliRunner().invoke(app, ["judge", str(later.path), "--judge", JUDGE, "--judge-model", narrator])
    assert judged.exit_code == 0, judged.output
    selection = json.loads((task / "selection.json").read_text())
    assert selection["strategy"] == "longest-story" and selection["chosen"] == 1


def test_a_guide_by_dotted_path_chooses_each_step(paper_kind: object, rooms: Path, tmp_path: Path) -> None:  # noqa: F811
    planned = PlannedReplies(plan=[])
    first, last = action_reply("I press Enter.", 'agent.hotkey(["enter"])'), action_reply("Done.", "agent.done()")

    def by_seed(request: ScriptRequest) -> str:  # the second candidate ends the task
        if role_of(request.messages) != "policy":
            return planned(request)
        return last if request.config.seed == PAPER_SEEDS[1] else first

    Script("paper-rooms", [by_seed] * 40)
    Script("end-guide-model", [])  # the guide calls no model
    out = _run(tmp_path, "guided-rooms", "--guide", GUIDE, "--candidates", "2", "--guide-model",
               "scripted/end-guide-model", "--max-steps", "3")
    assert "outcome done after 1 steps" in out
    layout = RunLayout(tmp_path / "runs", "guided-rooms")
    task = next(p for p in layout.path.iterdir() if p.is_dir() and (p / "rollout-0").is_dir())
    step, = layout.task(task.name).rollout(0).iter_steps()
    assert step.guide is not None and step.guide["guide"] == "end-guide" and step.guide["chosen"] == 1
    # The guide's own options are read by its Options model: first candidate, three steps.
    out = _run(tmp_path, "guided-first", "--guide", GUIDE, "--candidates", "2", "--guide-model",
               "scripted/end-guide-model", "--max-steps", "3", "-c", "guide.options.pick=first")
    assert "outcome step_limit after 3 steps" in out
    steps = list(RunLayout(tmp_path / "runs", "guided-first").task(task.name).rollout(0).iter_steps())
    assert [s.guide["chosen"] for s in steps if s.guide is not None] == [0, 0, 0]


def test_a_model_provider_by_dotted_path_serves_the_policy(paper_kind: object, rooms: Path, tmp_path: Path) -> None:  # noqa: F811
    try:
        result = CliRunner().invoke(app, [
            "run", "--env", "paper", "--task", "Press Enter once", "--model", "my_rooms:DoneAPI/done-1",
            "--out", str(tmp_path / "runs"), "--run-id", "provider-rooms", "-c", "worker.reflection=false",
        ], env={"COLUMNS": "400"})  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "outcome done after 1 steps" in flatten(result.output)
        ledger = (RunLayout(tmp_path / "runs", "provider-rooms").ledger_path).read_text()
        assert '"model":"always-done/done-1"' in ledger.replace(" ", "")
    finally:
        PROVIDERS.unregister("always-done")


def test_critic_bench_runs_a_critic_by_dotted_path(rooms: Path, run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    labels = tmp_path / "labels.jsonl"
    runner = CliRunner()
    made = runner.invoke(app, ["critic-bench", "--labels-from", str(run_dir), "--write", str(labels)])
    assert made.exit_code == 0, made.output
    Script("bench-word", [Reply(text="ACCEPT"), Reply(text="ACCEPT"), Reply(text="REJECT")])
    result = runner.invoke(app, ["critic-bench", str(labels), "--critic", CRITIC, "--model", "scripted/bench-word",
                                 "-j", "1", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    scores = json.loads((tmp_path / "r.json").read_text())[CRITIC]["scores"]["overall"]
    assert (scores["tp"], scores["fp"], scores["fn"]) == (1, 1, 1)  # a/0 tp, a/1 fp, b/0 fn
    assert load_verdict(run_dir / "task-a" / "rollout-0", "one-word") is not None


@pytest.mark.parametrize(("args", "message"), [
    (["--strategy", "retry", "--critic", "my_rooms:Nowhere", "--critic-model", "scripted/x"],
     "critic my_rooms:Nowhere: "),
    (["--strategy", "retry", "--critic", "my_rooms:WordOptions", "--critic-model", "scripted/x"],
     "not a critic"),
    (["--strategy", "retry", "--critic", CRITIC, "--critic-model", "scripted/x", "-c", "critic.options.colour=red"],
     "colour"),
    (["--strategy", "wide", "--judge", "my_rooms:WordOptions"], "not a judge"),
    (["--guide", GUIDE, "--guide-model", "scripted/x", "-c", "guide.options.pick=middle"],
     "guide.options.pick for my_rooms:EndGuide: Input should be 'first' or 'last'"),
    (["--strategy", "wide", "--judge", "no_such_package.judges:Mine"], "judge no_such_package.judges:Mine: "),
])
def test_a_bad_dotted_path_is_one_line_before_any_rollout(rooms: Path, tmp_path: Path, args: list[str],
                                                          message: str) -> None:
    result = CliRunner().invoke(app, ["run", "--task", "Press Enter once", "--model", "scripted/x",
                                      "--out", str(tmp_path), *args], env={"COLUMNS": "400"})
    assert result.exit_code != 0
    assert message in flatten(result.output)
    assert not list(tmp_path.glob("*/config.json"))  # refused before a run folder was written


def test_help_texts_list_the_registered_names_and_the_dotted_form() -> None:
    help_text = flatten(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"}).output)
    for name in (*JUDGES.names(), *CRITICS.names()):
        assert name in help_text
    assert help_text.count("package.module:Class") >= 3  # --strategy, --critic, --judge, --guide
    for command, names in ((["bench", "osworld"], JUDGES.names()), (["judge"], JUDGES.names()),
                           (["sweep"], JUDGES.names()), (["critic-bench"], CRITICS.names()),
                           (["critic"], CRITICS.names()),
                           (["models", "check"], [*JUDGES.names(), *CRITICS.names(), *GUIDES.names()])):
        text = flatten(CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"}).output)
        assert all(n in text for n in names) and "package.module:Class" in text, (command, names)
