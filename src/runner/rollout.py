"""One rollout: screenshot → propose → execute → settle → screenshot, until an outcome.

Each step is written to disk the moment it ends, from a ``finally``, so a step cut short by
a dead environment or a failed call is kept with what it had. The loop ends only through
the typed outcomes of `runner.outcomes`; the header gets the matching status. Step hooks
(the judge's narrator, live progress) get each stored step as it lands; they run beside
the rollout and are awaited before it returns.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from agent_s3 import CallCodeAgent, Proposal, RepeatedFormatError, Wait, Worker
from core import clock
from core.atomic import is_disk_full
from core.config import redact_urls
from core.llm import ModelCallError, ScriptError
from core.protocols import EnvError, Environment, EnvironmentLost, ExecResult
from core.trajectory import RolloutDir, RolloutInfo, Step, StepTimings

from .config import RolloutConfig
from .guided import ActionChoice, ActionChooser, PolicyStep
from .outcomes import (
    CostLimit,
    Done,
    EnvironmentGone,
    Errored,
    Failed,
    RepeatedFormat,
    RolloutEnd,
    RolloutResult,
    StepLimit,
)
from .settle import settle

__all__ = ["Rollout", "StepEvent", "StepHook"]

_log = logging.getLogger(__name__)
_ERROR_CHARS = 600


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A step as stored, with its screenshots (``after`` is None for a final done/fail)."""

    task_id: str
    rollout: int
    step: Step
    before: bytes
    after: bytes | None
    rollout_dir: RolloutDir


#: Called with every stored step; runs concurrently with the rest of the rollout.
StepHook = Callable[[StepEvent], Awaitable[None]]


def _short(text: str) -> str:
    text = redact_urls(text.strip())  # an error may quote a URL with credentials in it
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."


def _action_error(result: ExecResult) -> str | None:
    if result.ok and result.returncode == 0:
        return None
    detail = _short(result.stderr or result.stdout)
    return f"action {result.status}, return code {result.returncode}" + (f": {detail}" if detail else "")


def _image_label(key: str) -> str:
    """``guide_<key>`` in the characters a step image label allows."""
    return "guide_" + (re.sub(r"[^a-z0-9_]", "_", key.lower())[:30] or "image")


class Rollout:
    """Runs `worker` in `env` on `instruction`, writing into `rollout_dir`."""

    def __init__(
        self,
        *,
        env: Environment,
        worker: Worker,
        instruction: str,
        rollout_dir: RolloutDir,
        info: RolloutInfo,
        config: RolloutConfig,
        max_steps: int | None = None,
        spent: Callable[[], float] | None = None,
        hooks: Sequence[StepHook] = (),
        chooser: ActionChooser | None = None,
        prior: Sequence[Step] = (),
    ) -> None:
        """`prior` are steps this rollout continues from (a branch's shared prefix, stored
        with the rollout that took them): the chooser sees them as history, this rollout's
        own steps are numbered from 0 in its folder."""
        self.env = env
        self.worker = worker
        self.instruction = instruction
        self.dir = rollout_dir
        self.info = info
        self.config = config
        self.max_steps = max_steps or config.max_steps
        self.spent = spent or (lambda: 0.0)
        self.hooks = list(hooks)
        #: Chooses each step's action: the worker's one proposal, or a guide's pick of K.
        self.chooser = chooser or PolicyStep(worker, info.seed)
        self._stored: list[Step] = list(prior)
        self._hook_tasks: set[asyncio.Task[None]] = set()
        self._last_action: str | None = None
        self._steps = 0

    @property
    def history(self) -> list[Step]:
        """The steps the chooser sees: the prior ones, then this rollout's own so far."""
        return list(self._stored)

    async def run(self) -> RolloutResult:
        """Run to an outcome; the header is finished whatever happens (an interruption
        is recorded as ``errored`` and then propagates)."""
        begun = clock.monotonic()
        await asyncio.to_thread(self.dir.start, self.info)
        end: RolloutEnd | None = None
        disk_full: OSError | None = None
        try:
            await self._loop()
        except RolloutEnd as e:
            end = e
        except EnvironmentLost as e:
            end = EnvironmentGone(f"environment lost: {e}")
        except ModelCallError as e:
            end = Errored(f"model call failed: {e}")
        except ScriptError as e:
            end = Errored(f"scripted model: {e}")
            raise
        except asyncio.CancelledError:
            end = Errored("interrupted before the rollout ended")
            raise
        except Exception as e:
            end = Errored(f"{type(e).__name__}: {_short(str(e))}")
            if is_disk_full(e):  # no bug to trace; every further write would fail too
                disk_full = cast(OSError, e)
            else:
                _log.exception("rollout %s/%d errored", self.info.task_id, self.info.rollout)
        finally:
            final = end or Errored("the rollout stopped without an outcome")
            await self._drain_hooks()
            await asyncio.to_thread(self.dir.finish, final.status, final.reason)
        if disk_full is not None:  # the header says errored; the run stops with one line
            raise disk_full
        return RolloutResult(
            status=final.status,
            reason=final.reason,
            steps=self._steps,
            last_action=self._last_action,
            dollars=self.spent(),
            seconds=clock.monotonic() - begun,
        )

    async def _loop(self) -> None:
        screen = await self.env.screen_size()
        before = await self.env.screenshot()
        for index in range(self.max_steps):
            limit = self.config.cost_limit
            if limit is not None and (cost := self.spent()) >= limit:
                raise CostLimit(f"model calls cost ${cost:.4f}, at or over the limit of ${limit:.4f}")
            before = await self._step(index, before, screen)
        raise StepLimit(f"no outcome within {self.max_steps} steps")

    async def _step(self, index: int, before: bytes, screen: tuple[int, int]) -> bytes:
        """One step; returns the screen after it. Always stores the step, complete or not."""
        fields: dict[str, Any] = {"index": index, "started_at": clock.now()}
        timings = StepTimings()
        shots: dict[str, bytes] = {"before": before}
        try:
            t0 = clock.monotonic()
            try:
                choice = await self.chooser.choose(self.instruction, before, screen, self._stored)
            except RepeatedFormatError as e:
                fields.update(error=_short(str(e)), call_ids=[c.id for c in e.calls],
                              rejected=[_short(f) for f in e.feedback])
                raise RepeatedFormat(str(e)) from None
            finally:
                timings.propose = clock.monotonic() - t0
            proposal = choice.proposal
            self._fill(fields, proposal)
            await self._guide(index, fields, choice)
            self._last_action = proposal.action.kind
            if proposal.action.kind == "done":
                raise Done("the agent declared the task complete")
            if proposal.action.kind == "fail":
                raise Failed("the agent declared the task infeasible")
            t1 = clock.monotonic()
            try:
                await self._execute(proposal, before, fields)
            finally:
                timings.execute = clock.monotonic() - t1
            t2 = clock.monotonic()
            settled = await settle(self.env, self.config)
            timings.settle = clock.monotonic() - t2
            after = settled.screenshot if settled.screenshot is not None else await self.env.screenshot()
            shots["after"] = after
            return after
        except (EnvironmentLost, ModelCallError) as e:
            earlier = fields.get("error")
            lost = _short(f"{type(e).__name__}: {e}")
            fields["error"] = _short(f"{lost} (after: {earlier})") if earlier else lost
            raise
        finally:
            fields["timings"] = timings
            self._steps = index + 1
            await self._store(Step(**fields), shots)

    def _fill(self, fields: dict[str, Any], p: Proposal) -> None:
        fields.update(
            thought=p.thought,
            reflection=p.reflection.text if p.reflection else None,
            action=p.action_record(),
            code=p.code,
            pointer=list(p.pointer_events),
            call_ids=p.call_ids,
            rejected=[_short(f) for f in p.format_errors],
        )

    async def _guide(self, index: int, fields: dict[str, Any], choice: ActionChoice) -> None:
        """Every call of the choice, and the guide's record with its pictures stored beside the step."""
        fields["call_ids"] = choice.call_ids
        if choice.guide is None:
            return
        names = {label: await asyncio.to_thread(self.dir.write_step_image, index, _image_label(label), png)
                 for label, png in choice.images.items()}
        fields["guide"] = {**choice.guide, "images": names}

    async def _execute(self, p: Proposal, before: bytes, fields: dict[str, Any]) -> None:
        action = p.action
        if isinstance(action, CallCodeAgent):
            sandbox = self.env.sandbox()
            if sandbox is None:
                fields["error"] = "this environment offers no sandbox for the code agent"
                self.worker.record(p, "not run: this environment has no code sandbox")
                return
            session = await self.worker.run_code_agent(p, self.instruction, before, sandbox)
            fields["code_agent"] = session.model_dump(mode="json")
            fields["call_ids"] = [*fields["call_ids"], *session.call_ids]
            self.worker.record(p, code_agent=session)
        elif isinstance(action, Wait):
            seconds = min(action.seconds, self.config.max_wait_seconds)
            await asyncio.sleep(seconds)
            self.worker.record(p, f"waited {seconds:g} s")
        elif p.code is not None:
            try:
                result = await self.env.act(p.code)
            except EnvironmentLost:
                raise
            except EnvError as e:  # the server could not run it: a failed action, not a dead one
                result = ExecResult(status="error", returncode=-1, stderr=f"{type(e).__name__}: {e}")
            fields["error"] = _action_error(result)
            self.worker.record(p, result)
        else:
            self.worker.record(p, "nothing to execute")

    async def _store(self, step: Step, shots: dict[str, bytes]) -> None:
        stored = await asyncio.to_thread(self.dir.append_step, step, shots)
        self._stored.append(stored)
        if not self.hooks:
            return
        event = StepEvent(
            task_id=self.info.task_id,
            rollout=self.info.rollout,
            step=stored,
            before=shots["before"],
            after=shots.get("after"),
            rollout_dir=self.dir,
        )
        for hook in self.hooks:
            task = asyncio.create_task(self._call_hook(hook, event))
            self._hook_tasks.add(task)
            task.add_done_callback(self._hook_tasks.discard)

    async def _call_hook(self, hook: StepHook, event: StepEvent) -> None:
        try:
            await hook(event)
        except Exception:
            _log.exception("step hook failed on %s/%d step %d", event.task_id, event.rollout, event.step.index)

    async def _drain_hooks(self) -> None:
        if self._hook_tasks:
            await asyncio.gather(*list(self._hook_tasks), return_exceptions=True)
