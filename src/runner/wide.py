"""Wide scaling: N rollouts of one task in parallel, narrated as they run, one judge.

Each rollout borrows its own environment, reverted to the task's snapshot, and runs one
model of the mixture with stochastic decoding and its own seed (recorded in its header).
At most ``wide.concurrency`` rollouts run at once (a task group and a semaphore); calls to
one endpoint are bounded by the model layer (``wide.per_provider``). A rollout lost to the
world (environment lost, provider down, a failed setup) is run again on a fresh environment up
to ``wide.max_retries`` times, then recorded as it ended; the others go on regardless. A
rollout whose setup or scorer failed has no score: its task is errored (`TaskResult.errors`).

Every landed step is narrated in the background (`LiveNarrator`); when the last rollout
ends, the judge compares the rollouts that ended by the agent's doing and picks one.
The evaluator's scores are written for the report only and never reach the judge.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import random
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from bjudge import Candidate, FactCache, JudgeConfig, NarrativeBuilder, make_judge
from bjudge.representations import ending_of, narrate_rollout
from core import clock
from core.llm import ChatModel, GenerateConfig, PriceTable
from core.protocols import EnvError
from core.trajectory import (
    AGENT_OUTCOMES,
    WORLD_FAILURES,
    RolloutInfo,
    RolloutStatus,
    RunLayout,
    Selection,
    TaskResult,
)

from .config import RunConfig
from .kept import kept, whole_header
from .mixture import MixtureEntry, RolloutSlot, assign, parse_mixture
from .models import ModelSet, chat_model
from .narration import LiveNarrator
from .outcomes import RolloutResult
from .strategy import BaseStrategy, RolloutOutcome, Strategy, TaskRun, run_rollout, task_errors
from .wide_config import JudgeModelConfig, WideConfig

__all__ = ["FACT_CACHE_DIR", "ResumingWide", "WideScaling", "WideTimings", "fact_cache", "judge_name"]

_log = logging.getLogger(__name__)

#: Folder of the run holding cached facts (hidden from task listings by its dot).
FACT_CACHE_DIR = ".facts"

#: Called as a rollout changes state: (task id, rollout, status, model, attempt).
Watch = Callable[[str, int, str, str, int], None]


def judge_name(name: str) -> str | None:
    """The judge a ``wide.judge`` names (None for ``none``: no judge)."""
    return None if name == "none" else name


def fact_cache(layout: RunLayout) -> FactCache:
    """The run's fact cache, shared by live narration and offline re-judging."""
    return FactCache(layout.path / FACT_CACHE_DIR)


@dataclass
class WideTimings:
    """When one task's rollouts ended and its selection was made (`core.clock.monotonic`)."""

    started: float = 0.0
    rollout_ends: dict[int, float] = field(default_factory=dict)
    rollout_seconds: dict[int, float] = field(default_factory=dict)
    """Seconds of each rollout's agent loop (without task setup and scoring)."""
    rollout_starts: dict[int, float] = field(default_factory=dict)
    """When each rollout began: borrowing its environment, then setting the task up."""
    judge_started: float | None = None
    selected: float | None = None

    def span(self, k: int) -> float:
        """Rollout k from its start to its end: setup, agent loop, scoring (and retries)."""
        return self.rollout_ends[k] - self.rollout_starts[k]

    @property
    def last_end(self) -> float:
        return max(self.rollout_ends.values(), default=self.started)


def _stochastic(decoding: GenerateConfig, temperature: float) -> GenerateConfig:
    if decoding.temperature is not None or decoding.sampling is not None:
        return decoding
    return decoding.merged(GenerateConfig.diverse(temperature))


class WideScaling(BaseStrategy):
    """N rollouts and a judge (strategy name ``wide``); models of a mixture are built once
    and shared by every task, so close them with `aclose`."""

    name = "wide"
    roles = ("narrator", "judge")
    samples_mixture = True
    board = True

    @classmethod
    def rollouts(cls, cfg: RunConfig) -> int:
        """N: the mixture's rollouts (``wide.rollouts``, or the mixture's counts), else ``wide.rollouts``."""
        entries = parse_mixture(cfg.wide.mixture)
        if not entries:
            return cfg.wide.rollouts or 1
        return len(assign(entries, cfg.wide.rollouts, 0))

    @classmethod
    def width(cls, cfg: RunConfig) -> int:
        n = cls.rollouts(cfg)
        return min(n, cfg.wide.concurrency or n)

    @classmethod
    def check(cls, cfg: RunConfig) -> None:
        entries = parse_mixture(cfg.wide.mixture)  # a bad mixture is one line
        if entries:
            assign(entries, cfg.wide.rollouts, 0)

    @classmethod
    def resuming(cls, cfg: RunConfig, **options: Any) -> Strategy:
        return ResumingWide(**options)

    def __init__(self, watch: Watch | None = None) -> None:
        self.watch = watch
        self.outcomes: dict[str, list[RolloutOutcome]] = {}
        self.selections: dict[str, Selection | None] = {}
        self.timings: dict[str, WideTimings] = {}
        self._models: dict[str, ChatModel] = {}

    async def aclose(self) -> None:
        """Close the connections of the models this strategy built."""
        for model in self._models.values():
            await model.aclose()
        self._models.clear()

    # -- models -------------------------------------------------------------------------

    def _entries(self, run: TaskRun) -> list[MixtureEntry]:
        wide, policy = run.config.wide, run.config.policy
        entries = parse_mixture(wide.mixture)
        if entries:
            return entries
        return [MixtureEntry(model=policy.model, count=wide.rollouts or 1, base_url=policy.base_url,
                             api_key=policy.api_key, decoding=policy.generate)]

    def _plain(self, run: TaskRun, entry: MixtureEntry) -> ChatModel:
        """The entry's model with its own decoding (grounding, coding, reflection use it)."""
        wide, policy = run.config.wide, run.config.policy
        if entry.model == policy.model and entry.base_url == policy.base_url and wide.per_provider is None:
            return run.models.policy  # the run's own model and connections
        key = entry.model_dump_json(exclude={"count"})
        model = self._models.get(key)
        if model is None:  # the entry's endpoint and decoding, the policy's timeout and budget
            own = policy.model_copy(update={"model": entry.model, "base_url": entry.base_url, "api_key": entry.api_key,
                                            "generate": entry.decoding,
                                            "max_connections": wide.per_provider or policy.max_connections})
            model = self._models[key] = chat_model(own, run.ledger, PriceTable(run.config.prices))
        return model

    def _model_set(self, run: TaskRun, entry: MixtureEntry) -> ModelSet:
        cfg, plain = run.config, self._plain(run, entry)
        policy = copy.copy(plain)  # shares the connections; only the policy decodes stochastically
        policy.config = _stochastic(plain.config.merged(entry.decoding), cfg.wide.temperature)
        return ModelSet(
            policy=policy,
            grounding=run.models.grounding if cfg.grounding else plain,
            code=run.models.code if cfg.code_model else plain,
            reflection=run.models.reflection if cfg.reflection_model else plain,
        )

    def _judge_model(self, run: TaskRun) -> ChatModel:
        return self._side_model(run, run.config.wide.judge_model)

    def _narrator_model(self, run: TaskRun) -> ChatModel:
        wide = run.config.wide
        return self._side_model(run, wide.narrator_model or wide.judge_model)

    def _side_model(self, run: TaskRun, chosen: JudgeModelConfig | None) -> ChatModel:
        """The narrator's or judge's model (None: the policy's), built once per setting."""
        if chosen is None:
            return run.models.policy
        key = "judge:" + chosen.model_dump_json()
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = chat_model(chosen, run.ledger, PriceTable(run.config.prices))
        return model

    # -- running ------------------------------------------------------------------------

    async def __call__(self, run: TaskRun) -> TaskResult:
        wide: WideConfig = run.config.wide
        task_id = run.task.id
        await asyncio.to_thread(run.task_dir.write_task, run.task)
        base_seed = wide.seed if wide.seed is not None else random.SystemRandom().randrange(2**30)
        slots = assign(self._entries(run), wide.rollouts, base_seed)
        sets = {slot.index: self._model_set(run, slot.entry) for slot in slots}
        judge_model = self._judge_model(run).with_tags(run=run.layout.run_id, task=task_id)
        narrator_model = self._narrator_model(run).with_tags(run=run.layout.run_id, task=task_id)
        which = judge_name(wide.judge)
        builder = NarrativeBuilder(narrator_model, fact_cache(run.layout), wide.narrative) if which else None
        timings = self.timings[task_id] = WideTimings(started=clock.monotonic())
        outcomes: dict[int, RolloutOutcome] = {}
        for slot in slots:
            self._tell(task_id, slot.index, "waiting", slot.entry.model, 1)
        narrator = LiveNarrator(builder) if builder is not None else None
        hooked = dataclasses.replace(run, hooks=[*run.hooks, narrator.hook] if narrator else list(run.hooks))

        candidates: dict[int, Candidate] = {}

        running = asyncio.Semaphore(wide.concurrency or len(slots))

        async def one(slot: RolloutSlot) -> None:
            async with running:
                await rollout_and_candidate(slot)

        async def rollout_and_candidate(slot: RolloutSlot) -> None:
            k = slot.index
            timings.rollout_starts[k] = clock.monotonic()
            outcome = outcomes[k] = await self._rollout(hooked, slot, sets[k], narrator)
            timings.rollout_ends[k] = clock.monotonic()
            timings.rollout_seconds[k] = outcome.result.seconds
            if narrator is not None and builder is not None and outcome.result.status in AGENT_OUTCOMES:
                # built now, while other rollouts run, so the judge waits only on the last one
                try:
                    await narrator.settle(k)
                    header = await asyncio.to_thread(run.task_dir.rollout(k).read_info)
                    candidates[k] = await builder.candidate(k, ending=ending_of(header))
                    await asyncio.to_thread(run.task_dir.write_narrative, builder.narrative(k))
                except Exception:  # one rollout's narration must not stop the others; it is no candidate
                    _log.exception("rollout %s/%d could not be narrated; the judge leaves it out", task_id, k)

        async with AsyncExitStack() as stack:
            if narrator is not None:
                await stack.enter_async_context(narrator)  # narrations still under way end here
            async with asyncio.TaskGroup() as group:  # Ctrl-C cancels every rollout at once
                for slot in slots:
                    group.create_task(one(slot))
        missing = [s.index for s in slots if s.index not in outcomes]
        if missing:
            raise RuntimeError(f"rollouts {missing} of {task_id} ended without an outcome")
        ordered = [outcomes[k] for k in sorted(outcomes)]
        self.outcomes[task_id] = ordered
        timings.judge_started = clock.monotonic()
        selection = await self._select(run, builder, judge_model, which,
                                       [candidates[k] for k in sorted(candidates)], base_seed)
        timings.selected = clock.monotonic()
        self.selections[task_id] = selection
        chosen = selection.chosen if selection is not None else None
        result = TaskResult.from_scores(task_id, {o.index: o.score for o in ordered}, selected=chosen,
                                        errors=task_errors(ordered))
        await asyncio.to_thread(run.task_dir.write_result, result)
        return result

    def _tell(self, task_id: str, k: int, status: str, model: str, attempt: int) -> None:
        if self.watch is not None:
            self.watch(task_id, k, status, model, attempt)

    async def _rollout(self, run: TaskRun, slot: RolloutSlot, models: ModelSet,
                       narrator: LiveNarrator | None) -> RolloutOutcome:
        """Run rollout k, again on a fresh environment after a world failure."""
        k, tries = slot.index, run.config.wide.max_retries + 1
        outcome: RolloutOutcome | None = None
        for attempt in range(1, tries + 1):
            if narrator is not None and attempt > 1:
                await narrator.restart(k)
            self._tell(run.task.id, k, "starting", slot.entry.model, attempt)
            outcome = await self._attempt(run, slot, models, attempt)
            if attempt > 1:
                await asyncio.to_thread(self._record_attempts, run, k, attempt)
            self._tell(run.task.id, k, outcome.shown_status, slot.entry.model, attempt)
            if outcome.result.status not in WORLD_FAILURES:  # a failed scorer is not run again: that would
                break  # pay for the whole rollout again (a resumed run redoes it)
        assert outcome is not None
        return outcome

    async def _attempt(self, run: TaskRun, slot: RolloutSlot, models: ModelSet, attempt: int) -> RolloutOutcome:
        """One attempt of rollout k on an environment borrowed for it; never raises but
        for cancellation (a failure of this rollout must not stop the others)."""
        k = slot.index
        try:
            env = await run.pool.acquire()
        except EnvError as e:  # e.g. a dead desktop could not be replaced
            return await self._errored(run, slot, f"no environment for the rollout: {e}", lost=True)
        try:
            self._tell(run.task.id, k, "running", slot.entry.model, attempt)
            return await run_rollout(run, k, env, seed=slot.seed, models=models)
        except Exception as e:
            _log.exception("rollout %s/%d failed", run.task.id, k)
            return await self._errored(run, slot, f"{type(e).__name__}: {e}"[:600], lost=False)
        finally:
            run.pool.release(env)  # a dead environment is replaced by the pool on its next loan

    async def _errored(self, run: TaskRun, slot: RolloutSlot, reason: str, *, lost: bool) -> RolloutOutcome:
        status: RolloutStatus = "environment_lost" if lost else "errored"
        await asyncio.to_thread(self._finish_header, run, slot, status, reason)
        return RolloutOutcome(slot.index, RolloutResult(status, reason, 0, None, 0.0, 0.0), None)

    @staticmethod
    def _finish_header(run: TaskRun, slot: RolloutSlot, status: RolloutStatus, reason: str) -> None:
        rd = run.layout.rollout(run.task.id, slot.index)
        header = rd.read_info()
        if header is None:
            rd.start(RolloutInfo(run_id=run.layout.run_id, task_id=run.task.id, rollout=slot.index,
                                 model=slot.entry.model, seed=slot.seed, started_at=clock.now(),
                                 label=run.config.label))
        if header is not None and header.finished:  # keep its steps; the header says what happened
            rd.write_info(header.model_copy(update={"status": status, "reason": reason}))
        else:
            rd.finish(status, reason)

    @staticmethod
    def _record_attempts(run: TaskRun, k: int, attempt: int) -> None:
        rd = run.layout.rollout(run.task.id, k)
        header = rd.read_info()
        if header is not None:
            rd.write_info(header.model_copy(update={"attempts": attempt}))

    async def _select(self, run: TaskRun, builder: NarrativeBuilder | None, judge_model: ChatModel,
                      which: str | None, candidates: list[Candidate], seed: int) -> Selection | None:
        """The judge's pick among the candidates, the rollouts that ended by the agent's
        doing (None: no judge)."""
        if builder is None or which is None:
            return None
        wide = run.config.wide
        cfg = wide.judging if wide.judging.seed is not None else wide.judging.model_copy(update={"seed": seed})
        judge = make_judge(which, judge_model, JudgeConfig.model_validate(cfg.model_dump()))
        selection = await judge(run.task.instruction, candidates)

        def store() -> None:
            for k in builder.rollouts():  # world-failed rollouts' narratives too, for the report
                run.task_dir.write_narrative(builder.narrative(k))
            run.task_dir.write_selection(selection)

        await asyncio.to_thread(store)
        return selection


class ResumingWide(WideScaling):
    """Wide scaling that keeps the rollouts a previous attempt of the run finished (their
    facts come from the fact cache), runs the others, then judges them all."""

    name = "wide"

    async def _rollout(self, run: TaskRun, slot: RolloutSlot, models: ModelSet,
                       narrator: LiveNarrator | None) -> RolloutOutcome:
        k = slot.index
        rd = run.layout.rollout(run.task.id, k)
        info = await asyncio.to_thread(whole_header, rd)
        if not kept(info, run.task):
            return await super()._rollout(run, slot, models, narrator)
        assert info is not None
        self._tell(run.task.id, k, info.status, info.model, info.attempts)
        if narrator is not None and info.status in AGENT_OUTCOMES:
            await narrate_rollout(narrator.builder, rd)
        return RolloutOutcome.from_header(k, info)
