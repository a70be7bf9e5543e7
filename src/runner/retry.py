"""Retry until success: roll out, let an outcome critic judge, revert and try again.

Attempt k is rollout k of the task (``rollout-<k>/``, the critic's verdict beside it as
``critic-<name>.json``). The loop stops at the first attempt the critic accepts, or after
``critic.attempts`` rollouts; the last attempt made is the final one. The benchmark's own
evaluator scores every attempt (reported in ``result.json``'s ``scores``), and the final
attempt's score is the task's (``selected`` / ``selected_score``): the critic decides when
to stop, never what the task scored. ``selection.json`` names the critic, the final attempt
and why, with the critic's calls and cost.

A rollout the world ended (a lost environment, a setup failure, an errored loop) says
nothing about the agent: it uses up an attempt without a critic call. The policy step is
pluggable (`RolloutStep`, by default `run_rollout`), so a guided rollout can be retried too.
A critic that fails (its verdict carries ``error``) neither accepts nor rejects: the loop
goes on to the next attempt, and ``selection.json`` names that attempt as a critic error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import ValidationError

from core.llm import ChatModel, Ledger, MissingAPIKeyError, ModelError, PriceTable, is_scripted
from core.protocols import Environment
from core.trajectory import WORLD_FAILURES, Selection, TaskResult
from themis import Verdict, critic_options_model, grade_rollout, make_critic

from .config import CriticConfig, RunConfig
from .models import chat_model
from .strategy import BaseStrategy, RolloutOutcome, TaskRun, run_rollout, task_errors

__all__ = ["Attempt", "RetryUntilSuccess", "RolloutStep", "check_critic"]

#: Ledger module of the critic's calls (what `themis` writes).
CRITIC_MODULE = "critic"


class RolloutStep(Protocol):
    """Prepares the task in `env`, runs rollout `k` and scores it (`run_rollout`'s shape)."""

    def __call__(self, run: TaskRun, k: int, env: Environment, *, seed: int | None = None) -> Awaitable[RolloutOutcome]: ...


@dataclass(frozen=True)
class Attempt:
    """One rollout of the loop and what the critic made of it."""

    index: int
    outcome: RolloutOutcome
    verdict: Verdict | None
    #: Why there is no verdict: the world ended the rollout, or the critic could not grade.
    error: str | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict is not None and self.verdict.reward == 1

    @property
    def critic_error(self) -> str | None:
        """The critic's own failure (no verdict to act on), as opposed to a rejection."""
        return self.verdict.error if self.verdict is not None else None

    def describe(self) -> str:
        """One line: status, evaluator score, the critic's decision and reason."""
        r = self.outcome.result
        score = "none" if self.outcome.score is None else f"{self.outcome.score:g}"
        if self.outcome.error is not None:
            score = f"none ({self.outcome.error.outcome})"
        if self.verdict is not None and self.verdict.error is not None:
            said = f"ERROR (the critic failed, so this attempt was neither accepted nor rejected): {self.verdict.error}"
        elif self.verdict is not None:
            said = f"{'ACCEPT' if self.accepted else 'REJECT'}: {self.verdict.reason}"
        else:
            said = f"not judged: {self.error}"
        return f"attempt {self.index}: {r.status} after {r.steps} steps, score {score}; critic {said}"


def check_critic(cfg: RunConfig) -> None:
    """Refuse, before any desktop starts, a ``retry`` run whose critic cannot work: a
    scripted policy standing in as critic, bad options, or a missing API key
    (`RetryUntilSuccess.check`)."""
    section = cfg.critic
    if section.model is None and is_scripted(cfg.policy.model):
        raise ValueError("a scripted policy cannot judge rollouts: name the critic's model with --critic-model provider/model")
    options_model = critic_options_model(section.name)
    try:
        options_model(**section.options)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"critic.options.{where}: {first['msg']} (options: {', '.join(options_model.model_fields)})") from None
    if section.options.get("models"):
        raise ValueError("critic.options.models: per-role models are for the critic, filter and critic-bench "
                         "commands; a retry run's critic uses critic.model for every role")
    if section.model is None:
        return  # the policy's model: checked with the policy
    try:
        chat_model(section.model, Ledger())  # built and dropped: no connection is opened yet
    except MissingAPIKeyError as e:
        raise ValueError(f"the critic's model {section.model.model} needs an API key: set {e.variable}") from None
    except ModelError as e:
        raise ValueError(f"the critic's model: {e}") from None


@dataclass
class RetryUntilSuccess(BaseStrategy):
    """The ``retry`` strategy. Without arguments it takes everything from the run's
    ``critic`` section; a test or a caller may give the critic's name, model, options and
    the cap directly. Call `aclose` when done if the critic got a model of its own."""

    critic: str | None = None
    model: ChatModel | None = None
    options: dict[str, Any] | None = None
    attempts: int | None = None
    rollout: RolloutStep = run_rollout
    name: str = "retry"
    #: The final attempt's outcome per task id (what the command line reports).
    outcomes: dict[str, RolloutOutcome] = field(default_factory=dict)
    #: Every attempt per task id, in order.
    history: dict[str, list[Attempt]] = field(default_factory=dict)
    _owned: ChatModel | None = field(default=None, init=False, repr=False)

    roles: ClassVar[tuple[str, ...]] = ("critic",)
    finished_by_result: ClassVar[bool] = True  # it decides its own attempts: resumed per task

    @classmethod
    def check(cls, cfg: RunConfig) -> None:
        check_critic(cfg)

    def _settings(self, cfg: RunConfig) -> CriticConfig:
        base = cfg.critic
        return base.model_copy(update={
            "name": self.critic or base.name,
            "attempts": self.attempts or base.attempts,
            "options": base.options if self.options is None else self.options,
        })

    def _model(self, run: TaskRun) -> ChatModel:
        if self.model is not None:
            return self.model
        section = run.config.critic.model
        if section is None:
            return run.models.policy
        if self._owned is None:
            self._owned = chat_model(section, run.ledger, PriceTable(run.config.prices))
        return self._owned

    async def aclose(self) -> None:
        if self._owned is not None:
            await self._owned.aclose()
            self._owned = None

    async def __call__(self, run: TaskRun) -> TaskResult:
        settings = self._settings(run.config)
        model = self._model(run)
        # Unknown critic names or options fail here, before any rollout is paid for.
        make_critic(settings.name, model, **settings.options)
        await asyncio.to_thread(run.task_dir.write_task, run.task)
        attempts: list[Attempt] = []
        self.history[run.task.id] = attempts
        for k in range(settings.attempts):
            env = await run.pool.acquire()
            try:
                seed = None if run.config.seed is None else run.config.seed + k
                outcome = await self.rollout(run, k, env, seed=seed)
            finally:
                run.pool.release(env)
            attempt = await self._judge(run, settings, model, outcome)
            attempts.append(attempt)
            if attempt.accepted:
                break
        final = attempts[-1]
        self.outcomes[run.task.id] = final.outcome
        await asyncio.to_thread(run.task_dir.write_selection, self._selection(run, settings, attempts))
        result = TaskResult.from_scores(run.task.id, {a.index: a.outcome.score for a in attempts},
                                        selected=final.index, errors=task_errors(a.outcome for a in attempts))
        await asyncio.to_thread(run.task_dir.write_result, result)
        return result

    async def _judge(self, run: TaskRun, settings: CriticConfig, model: ChatModel,
                     outcome: RolloutOutcome) -> Attempt:
        status = outcome.result.status
        if status in WORLD_FAILURES:  # a failed scorer is no world failure: the critic never reads it
            return Attempt(outcome.index, outcome, None, f"the rollout ended as {status}: {outcome.result.reason}")
        tags = {"run": run.layout.run_id, "task": run.task.id, "rollout": outcome.index}
        critic = make_critic(settings.name, model.with_tags(**tags), **settings.options)
        rd = run.layout.rollout(run.task.id, outcome.index)
        try:
            verdict = await grade_rollout(critic, run.task, rd, durable=run.layout.durable)
        except (OSError, ValueError) as e:
            return Attempt(outcome.index, outcome, None, f"the critic could not grade it: {e}")
        return Attempt(outcome.index, outcome, verdict)

    def _selection(self, run: TaskRun, settings: CriticConfig, attempts: list[Attempt]) -> Selection:
        final = attempts[-1]
        if final.accepted:
            why = f"attempt {final.index} was accepted by the {settings.name} critic"
        else:
            why = f"no attempt was accepted within {len(attempts)}; the last one is final"
        errored = [a.index for a in attempts if a.critic_error is not None]
        if errored:
            why += (f"; the critic failed on attempt(s) {', '.join(map(str, errored))} "
                    "(errors, not rejections: see critic-<name>.json)")
        calls = run.ledger.calls(CRITIC_MODULE, run=run.layout.run_id, task=run.task.id)
        return Selection(
            strategy=f"retry-{settings.name}",
            candidates=[a.index for a in attempts],
            chosen=final.index,
            reasoning="\n".join([why, *(a.describe() for a in attempts)]),
            dollars=sum(r.dollars for r in calls),
            call_ids=[r.id for r in calls],
        )
