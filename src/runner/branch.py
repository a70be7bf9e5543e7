"""Branching mid-rollout: one rollout to step T, a checkpoint of its environment there, and
K rollouts that continue from that checkpoint, judged like a wide run.

Rollout 0 is the shared prefix: it runs ``branch.at`` steps (the first model of the
mixture), then its environment saves itself (`Environment.checkpoint`: memory, devices and
disk of a VM) and rollout 0 ends, its reason saying so. Rollouts 1..K each borrow an
environment, restore the checkpoint (the first branch keeps the prefix's own environment,
already there), take a worker whose history is the prefix's, and go on; their folders hold
only their own steps, numbered from 0, and their headers say which rollout and how many
steps they continue (``branch_of``, ``branch_at``): the shared prefix is recorded once. The
narrator's facts of the prefix are its own once too (every branch's narrative starts with
them) and the judge compares the K branches. A branch lost to the world is run again from
the checkpoint on a fresh environment. A prefix that ends on its own before step T (the
agent said done, or the budget ran out) is the task's only rollout.

The checkpoint is also handed to each branch's step guide (`GuidedStep.branch_point`), so
a guide can look ahead from it and come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from bjudge import Candidate, NarrativeBuilder
from bjudge.representations import ending_of
from core.protocols import Checkpoint, EnvError, Environment, EnvironmentLost
from core.trajectory import AGENT_OUTCOMES, WORLD_FAILURES, RolloutInfo, RolloutStatus, Step, TaskResult

from .config import RunConfig
from .guided import GuidedStep, guide_models, guided_config, make_chooser, tree_source
from .mixture import RolloutSlot, assign
from .models import ModelSet, make_worker, settled_config, spent_by
from .narration import LiveNarrator
from .outcomes import RolloutResult
from .recording import recorded
from .rollout import Rollout, StepEvent, StepHook
from .strategy import RolloutOutcome, Strategy, TaskRun
from .wide import WideScaling, WideTimings, fact_cache, judge_name

__all__ = ["BranchScaling", "BranchStart"]

_log = logging.getLogger(__name__)


@dataclass
class BranchStart:
    """Where the branches start: the checkpoint after the prefix, and what the prefix was."""

    checkpoint: Checkpoint
    steps: list[Step]
    """The prefix's steps, as the branches' step guides see them."""
    history: Any
    """The prefix worker's history, copied into each branch's worker."""
    events: list[StepEvent]
    """The prefix's landed steps with their screenshots (each branch's narrative starts with them)."""
    at: int


class _Shifted:
    """A step hook that hands a branch's steps on numbered after the prefix (narration)."""

    def __init__(self, hook: StepHook, offset: int) -> None:
        self.hook, self.offset = hook, offset

    async def __call__(self, event: StepEvent) -> None:
        step = event.step.model_copy(update={"index": event.step.index + self.offset})
        await self.hook(dataclasses.replace(event, step=step))


class BranchScaling(WideScaling):
    """One prefix rollout, a checkpoint, K branches and a judge (strategy name ``branch``)."""

    name = "branch"
    own_section = ("branch", "--branch-at and --branches")

    @classmethod
    def rollouts(cls, cfg: RunConfig) -> int:
        return cfg.branch.branches + 1  # the shared prefix is rollout 0

    @classmethod
    def width(cls, cfg: RunConfig) -> int:
        return cfg.branch.branches  # the first branch continues on the prefix's environment

    @classmethod
    def check(cls, cfg: RunConfig) -> None:
        super().check(cfg)
        if cfg.executor.kind == "ray":
            raise ValueError("--strategy branch needs the environments in this process (checkpoints are not "
                             "served across Ray hosts); drop --executor ray")
        if cfg.rollout.max_steps <= cfg.branch.at:
            raise ValueError(f"--branch-at {cfg.branch.at} leaves no step to branch within rollout.max_steps "
                             f"{cfg.rollout.max_steps}: lower --branch-at or raise --max-steps")

    @classmethod
    def resuming(cls, cfg: RunConfig, **options: Any) -> Strategy:
        return cls(**options)  # a resumed branch run starts its task again

    async def __call__(self, run: TaskRun) -> TaskResult:
        cfg = run.config
        task_id = run.task.id
        at, k_branches = cfg.branch.at, cfg.branch.branches
        await asyncio.to_thread(run.task_dir.write_task, run.task)
        base_seed = cfg.wide.seed if cfg.wide.seed is not None else random.SystemRandom().randrange(2**30)
        slots = assign(self._entries(run), k_branches, base_seed)
        branches = [dataclasses.replace(slot, index=slot.index + 1) for slot in slots]  # rollouts 1..K
        sets = {slot.index: self._model_set(run, slot.entry) for slot in branches}
        prefix_slot = dataclasses.replace(slots[0], index=0)
        which = judge_name(cfg.wide.judge)
        builder = (NarrativeBuilder(self._narrator_model(run).with_tags(run=run.layout.run_id, task=task_id),
                                    fact_cache(run.layout), cfg.wide.narrative) if which else None)
        timings = self.timings[task_id] = WideTimings(started=time.perf_counter())
        narrator = LiveNarrator(builder) if builder is not None else None
        outcomes: dict[int, RolloutOutcome] = {}
        candidates: dict[int, Candidate] = {}
        async with narrator if narrator is not None else contextlib.nullcontext():
            prefix_events: list[StepEvent] = []

            async def keep(event: StepEvent) -> None:
                prefix_events.append(event)

            hooks = [*run.hooks, keep, *([narrator.hook] if narrator else [])]
            timings.rollout_starts[0] = time.perf_counter()
            prefix, start, env = await self._prefix(dataclasses.replace(run, hooks=hooks), prefix_slot,
                                                    sets[1], at, prefix_events)
            outcomes[0] = prefix
            timings.rollout_ends[0] = time.perf_counter()
            if start is None:  # the prefix ended on its own: it is the task's one rollout
                if env is not None:
                    run.pool.release(env)
                self.outcomes[task_id] = [prefix]
                result = TaskResult.from_scores(task_id, {0: prefix.score}, selected=0)
                await asyncio.to_thread(run.task_dir.write_result, result)
                return result

            async def one(slot: RolloutSlot, mine: Environment | None) -> None:
                k = slot.index
                timings.rollout_starts[k] = time.perf_counter()
                outcome = outcomes[k] = await self._branch(run, slot, sets[k], start, mine, narrator)
                timings.rollout_ends[k] = time.perf_counter()
                timings.rollout_seconds[k] = outcome.result.seconds
                if narrator is not None and builder is not None and outcome.result.status in AGENT_OUTCOMES:
                    await narrator.settle(k)
                    header = await asyncio.to_thread(run.task_dir.rollout(k).read_info)
                    candidates[k] = await builder.candidate(k, ending=ending_of(header))
                    await asyncio.to_thread(run.task_dir.write_narrative, builder.narrative(k))

            await asyncio.gather(*(one(slot, env if n == 0 else None) for n, slot in enumerate(branches)))
        ordered = [outcomes[k] for k in sorted(outcomes)]
        self.outcomes[task_id] = ordered
        timings.judge_started = time.perf_counter()
        selection = await self._select(run, builder, self._judge_model(run).with_tags(run=run.layout.run_id,
                                                                                      task=task_id),
                                       which, [candidates[k] for k in sorted(candidates)], base_seed)
        timings.selected = time.perf_counter()
        self.selections[task_id] = selection
        chosen = selection.chosen if selection is not None else None
        scores = {o.index: o.score for o in ordered if o.index > 0}
        result = TaskResult.from_scores(task_id, scores, selected=chosen)
        await asyncio.to_thread(run.task_dir.write_result, result)
        return result

    # -- the prefix ----------------------------------------------------------------------

    async def _prefix(self, run: TaskRun, slot: RolloutSlot, models: ModelSet, at: int,
                      events: list[StepEvent]) -> tuple[RolloutOutcome, BranchStart | None, Environment | None]:
        """Rollout 0 up to step `at`, then its environment's checkpoint (tried again on a
        fresh environment after a world failure, as any rollout)."""
        outcome: RolloutOutcome | None = None
        for attempt in range(1, run.config.wide.max_retries + 2):
            events.clear()
            env = await run.pool.acquire()
            try:
                if not env.can_checkpoint():
                    raise EnvError(f"{env.name} cannot checkpoint a running rollout: --strategy branch needs "
                                   "environments that can (--env qemu)")
                outcome, rollout = await self._run(run, slot, models, env, at, attempt=attempt)
                if outcome.result.status in WORLD_FAILURES:
                    run.pool.release(env)
                    continue
                if rollout is None or outcome.result.status != "step_limit" or outcome.result.steps != at:
                    return await self._scored_alone(run, outcome, env), None, env
                checkpoint = await env.checkpoint(f"step {at} of rollout 0 ({run.task.id})")
            except EnvironmentLost as e:
                _log.warning("the prefix of %s lost its environment: %s", run.task.id, e)
                run.pool.release(env)
                continue
            except BaseException:
                run.pool.release(env)
                raise
            reason = f"the shared prefix: checkpointed after step {at}, continued as rollouts 1..{run.config.branch.branches}"
            rd = run.layout.rollout(run.task.id, 0)
            header = await asyncio.to_thread(rd.read_info)
            if header is not None:
                await asyncio.to_thread(rd.write_info, header.model_copy(update={"reason": reason}))
            start = BranchStart(checkpoint, rollout.history, copy.deepcopy(rollout.worker.history), list(events), at)
            return outcome, start, env
        lost = RolloutResult("environment_lost", "the shared prefix lost its environment on every attempt",
                             0, None, 0.0, 0.0)
        return outcome or RolloutOutcome(0, lost, None), None, None

    async def _scored_alone(self, run: TaskRun, outcome: RolloutOutcome, env: Environment) -> RolloutOutcome:
        """A prefix that ended before the branch point is scored as the task's only rollout."""
        if outcome.result.status in ("environment_lost", "errored"):
            return outcome
        cache = run.task_dir.path / "evaluation" / "rollout-0"
        try:
            score = await env.score_task(run.task, cache, last_action=outcome.result.last_action)
        except EnvError as e:
            return dataclasses.replace(outcome, score_error=str(e))
        return dataclasses.replace(outcome, score=score)

    # -- the branches --------------------------------------------------------------------

    async def _branch(self, run: TaskRun, slot: RolloutSlot, models: ModelSet, start: BranchStart,
                      mine: Environment | None, narrator: LiveNarrator | None) -> RolloutOutcome:
        k = slot.index
        outcome: RolloutOutcome | None = None
        for attempt in range(1, run.config.wide.max_retries + 2):
            if narrator is not None:
                if attempt > 1:
                    await narrator.restart(k)
                for event in start.events:  # the shared prefix opens every branch's narrative (cached facts)
                    await narrator.hook(dataclasses.replace(event, rollout=k))
            env = mine if attempt == 1 and mine is not None else await run.pool.acquire()
            try:
                if env is not mine:
                    await env.restore(start.checkpoint)
                hooks: list[StepHook] = [*run.hooks, *([_Shifted(narrator.hook, start.at)] if narrator else [])]
                outcome, _ = await self._run(dataclasses.replace(run, hooks=hooks), slot, models, env,
                                             max(1, (run.task.max_steps or run.config.rollout.max_steps) - start.at),
                                             start=start, attempt=attempt)
                if outcome.result.status not in WORLD_FAILURES:
                    outcome = await self._scored(run, outcome, env)
            except EnvironmentLost as e:
                outcome = RolloutOutcome(k, RolloutResult("environment_lost", f"restoring the checkpoint: {e}",
                                                          0, None, 0.0, 0.0), None)
            finally:
                run.pool.release(env)
            if outcome.result.status not in WORLD_FAILURES:
                break
        assert outcome is not None
        return outcome

    async def _scored(self, run: TaskRun, outcome: RolloutOutcome, env: Environment) -> RolloutOutcome:
        k = outcome.index
        cache = run.task_dir.path / "evaluation" / f"rollout-{k}"
        try:
            score = await env.score_task(run.task, cache, last_action=outcome.result.last_action)
        except EnvError as e:
            return dataclasses.replace(outcome, score_error=str(e))
        rd = run.layout.rollout(run.task.id, k)
        header = await asyncio.to_thread(rd.read_info)
        if header is not None and score is not None:
            await asyncio.to_thread(rd.write_info, header.model_copy(update={"score": score}))
        return dataclasses.replace(outcome, score=score)

    # -- one rollout ---------------------------------------------------------------------

    async def _run(self, run: TaskRun, slot: RolloutSlot, models: ModelSet, env: Environment, max_steps: int, *,
                   start: BranchStart | None = None, attempt: int = 1) -> tuple[RolloutOutcome, Rollout | None]:
        """Rollout `slot.index` in `env` (set up for the task by the prefix; already at the
        checkpoint for a branch), unscored."""
        task, layout, k = run.task, run.layout, slot.index
        tags = {"run": layout.run_id, "task": task.id, "rollout": k}
        tagged = models.tagged(**tags)
        rd = layout.rollout(task.id, k)
        info = RolloutInfo(run_id=layout.run_id, task_id=task.id, rollout=k, model=tagged.policy.name, seed=slot.seed,
                           environment=env.name, started_at=time.time(), attempts=attempt,
                           branch_of=0 if start else None, branch_at=start.at if start else None)
        if start is None:
            try:
                await env.prepare_task(task, run.task_dir.path / "evaluation" / f"rollout-{k}")
            except EnvError as e:
                status: RolloutStatus = "environment_lost" if isinstance(e, EnvironmentLost) else "errored"
                await asyncio.to_thread(rd.start, info)
                await asyncio.to_thread(rd.finish, status, f"task setup failed: {e}")
                return RolloutOutcome(k, RolloutResult(status, f"task setup failed: {e}", 0, None, 0.0, 0.0), None), None
        info = info.model_copy(update={"network": (await env.worker_facts()).network})
        guide_model, pointer = guide_models(run.models, tagged, tags)
        cfg = await settled_config(guided_config(run.config), env)
        worker = make_worker(cfg, tagged, env)
        if start is not None:
            worker.history = copy.deepcopy(start.history)
        chooser = make_chooser(run.config, worker, guide_model, seed=slot.seed, pointer=pointer, tree=tree_source(env))
        if isinstance(chooser, GuidedStep) and start is not None:
            chooser.branch_point = start.checkpoint
        rollout = Rollout(env=env, worker=worker, instruction=task.instruction, rollout_dir=rd, info=info,
                          config=run.config.rollout, max_steps=max_steps, spent=lambda: spent_by(run.ledger, **tags),
                          hooks=run.hooks, chooser=chooser, prior=start.steps if start else ())
        async with recorded(env, rd.path, enabled=run.config.rollout.record and start is not None):
            result = await rollout.run()
        return RolloutOutcome(k, result, None), rollout

