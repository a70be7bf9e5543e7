"""Critics by name: ``make_critic("themis" | "lastk" | "sequential", model, **options)``.

A critic is an async callable, ``await critic(task, rollout) -> Verdict``, where `task` is
a `core.trajectory.Task` (or just its instruction) and `rollout` anything with
`iter_steps` and `read_screenshot`, such as a `core.trajectory.RolloutDir`. It never
writes; `themis.grading` saves verdicts beside the trajectory.

A critic class has a ``name``, its settings as a pydantic model ``Options`` and is built as
``cls(model, options)`` (``cls(model, options, role_models)`` when ``has_roles``);
``reply_contract`` is the reply model of its deciding call (what ``models check`` asks in).
`CRITICS` is the one list of their names: the run configuration's ``critic.name``, the
``--critic`` options and their help read it, and a dotted path ``package.module:Class``
names a critic of your own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ValidationError

from core.llm import ChatModel
from core.registry import Registry

from .context import RoleContext
from .deliberation import deliberate
from .judge import reward_of
from .lastk import LastKCritic, tally
from .options import ThemisOptions
from .record import ThemisRecord, ThemisVoteRecord, Verdict
from .schemas import JudgeReply
from .sequential import SequentialCritic
from .view import TaskInfo, TaskLike, TrajectorySource, TrajectoryView, load_view, task_info

__all__ = ["CRITICS", "Critic", "ThemisCritic", "critic_options_model", "make_critic"]


class Critic(Protocol):
    name: str
    options: BaseModel

    async def __call__(self, task: TaskLike, trajectory: TrajectorySource) -> Verdict: ...


class ThemisCritic:
    """OS-Themis: selector and verifier build milestone evidence, the reviewer audits it,
    the judge decides (see `themis.deliberation`). With ``votes`` k > 1, k independent
    deliberations vote by the paper's rule (majority, all or any)."""

    name = "themis"
    Options: ClassVar[type[BaseModel]] = ThemisOptions
    #: Its roles may each have a model of their own (``models.<role>``).
    has_roles: ClassVar[bool] = True
    reply_contract: ClassVar[type[BaseModel]] = JudgeReply

    def __init__(self, model: ChatModel, options: ThemisOptions,
                 role_models: Mapping[str, ChatModel] | None = None) -> None:
        self.model = model
        self.options = options
        self.role_models = dict(role_models or {})
        wanted = {r: n for r, n in options.models.items() if n != model.name}
        lacking = sorted(set(wanted) - set(self.role_models))
        if lacking:
            raise ValueError(f"option models names a model for {', '.join(lacking)}, but none was built: "
                             "pass role_models (the command line builds them from --option models.<role>=...)")
        for role, m in self.role_models.items():
            if role in options.models and m.name != options.models[role]:  # type: ignore[index]
                raise ValueError(f"the {role} model is {m.name}, but option models.{role} names {options.models[role]}")  # type: ignore[index]

    async def _run(self, view: TrajectoryView, info: TaskInfo) -> tuple[RoleContext, Literal[0, 1] | None, str, str | None]:
        """One deliberation: its context, reward, reason and error."""
        ctx = RoleContext(model=self.model, view=view, task=info, options=self.options, critic=self.name,
                          models=dict(self.role_models))
        reply = await deliberate(ctx)
        if not self.options.judge:
            error = _failure(ctx.record, reply, judged=False)
            reward, reason = _without_judge(ctx.record)
            return ctx, (reward if error is None else None), (error or reason), error
        error = _failure(ctx.record, reply)
        if error is not None or reply is None:
            return ctx, None, error or "", error
        return ctx, reward_of(reply), reply.reason, None

    async def __call__(self, task: TaskLike, trajectory: TrajectorySource) -> Verdict:
        started = time.perf_counter()
        info = task_info(task)
        view = await load_view(trajectory, image_side=self.options.image_side)
        runs = [await self._run(view, info) for _ in range(self.options.votes)]
        record: ThemisRecord | ThemisVoteRecord
        if len(runs) == 1:
            ctx, reward, reason, error = runs[0]
            record = ctx.record
        else:
            rewards = [r[1] for r in runs]
            failed = [i for i, r in enumerate(runs, start=1) if r[3] is not None]
            error = f"{len(failed)} of {len(runs)} deliberations failed (run {failed[0]}: {runs[failed[0] - 1][3]})" \
                if failed else None
            votes = [r for r in rewards if r is not None]
            reward = tally(votes, self.options.vote) if error is None else None
            reason = error or f"{sum(votes)} of {len(votes)} deliberations accepted ({self.options.vote} vote)"
            record = ThemisVoteRecord(vote=self.options.vote, runs=[r[0].record for r in runs], rewards=rewards,
                                      errors=[r[3] for r in runs])
        return Verdict(
            critic=self.name,
            model=self.model.name,
            reward=reward,
            reason=reason,
            task_id=info.task_id,
            options=self.options.model_dump(),
            seconds=time.perf_counter() - started,
            calls=sum(r[0].calls for r in runs),
            error=error,
            record=record,
        )


def _without_judge(record: ThemisRecord) -> tuple[Literal[0, 1], str]:
    """The reward of the no-judge ablation: 1 only when every milestone was verified a success."""
    checks = record.checks()
    good = sum(c.verdict == "success" for c in checks)
    reward: Literal[0, 1] = 1 if checks and good == len(checks) else 0
    return reward, f"no judge: {good} of {len(checks)} milestones verified as success"


def _failure(record: ThemisRecord, reply: JudgeReply | None, *, judged: bool = True) -> str | None:
    """Why the deliberation cannot stand as a verdict, or None.

    The judge failing leaves no decision. A role whose every attempt was a failed call
    (the model unreachable, not a reply the role refused) means the judge decided without
    evidence it should have had, so that is a failure too; replies that never validated are
    evidence of their own and the judge is told of them.
    """
    if reply is None and judged:
        failure = next((f for f in reversed(record.failures) if f.role == "judge"), None)
        last = failure.attempts[-1].error if failure is not None and failure.attempts else "no call"
        return f"the judge gave no valid reply: {last}"
    for f in record.failures:
        if f.attempts and all(a.reply is None for a in f.attempts):
            return f"{f.what}: every call failed ({f.attempts[-1].error})"
    return None


def _problem(found: Any) -> str | None:
    if not (isinstance(found, type) and isinstance(getattr(found, "name", None), str)):
        return "not a critic: a class with a name and an Options model, built as cls(model, options)"
    options = getattr(found, "Options", None)
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        return "a critic class needs Options, the pydantic model of its settings"
    return None


#: Critic name -> its class.
CRITICS: Registry[Any] = Registry("critic", check=_problem, name_of=lambda cls: cls.name)
CRITICS.register("themis", ThemisCritic, "OS-Themis: milestones, verifier, reviewer, judge")
CRITICS.register("lastk", LastKCritic, "the last K screens")
CRITICS.register("sequential", SequentialCritic, "screen by screen")


def critic_options_model(name: str) -> type[BaseModel]:
    """The settings model of the critic `name` (an unknown name is a `ValueError`)."""
    options: type[BaseModel] = CRITICS.get(name).Options
    return options


def make_critic(name: str, model: ChatModel, *, role_models: Mapping[str, ChatModel] | None = None,
                **options: Any) -> Critic:
    """The critic `name` over `model`; unknown names and options end in one clear line.

    `role_models` are the models OS-Themis roles use instead of `model` (its ``models``
    option names them; the caller builds them)."""
    cls = CRITICS.get(name)
    options_model = cls.Options
    try:
        parsed = options_model(**options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "options"
        raise ValueError(f"critic {name!r} option {where}: {first['msg']} "
                         f"(options: {', '.join(options_model.model_fields)})") from None
    roles = bool(getattr(cls, "has_roles", False))
    if role_models and not roles:
        raise ValueError(f"critic {name!r} has no roles: per-role models are for themis")
    critic: Critic = cls(model, parsed, role_models) if roles else cls(model, parsed)
    return critic
