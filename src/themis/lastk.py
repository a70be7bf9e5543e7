"""Last-K frames (ZeroGUI-style direct assessment): one call over the final K screens,
score 0/1, optionally several samples combined by a vote."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel

from core.llm import ChatMessage, ChatModel, TextPart

from .asking import ask_json
from .options import LastKOptions
from .prompts import render
from .record import Failure, LastKRecord, LastKSample, Verdict
from .schemas import LastKReply
from .view import TaskLike, TrajectorySource, load_view, task_info

__all__ = ["LastKCritic", "tally"]


def tally(votes: Sequence[int], rule: str) -> Literal[0, 1]:
    """Combine 0/1 votes: ``majority`` (more than half), ``all`` or ``any``; no votes is 0."""
    if not votes:
        return 0
    if rule == "all":
        return 1 if all(votes) else 0
    if rule == "any":
        return 1 if any(votes) else 0
    if rule == "majority":
        return 1 if sum(votes) * 2 > len(votes) else 0
    raise ValueError(f"unknown vote {rule!r}: use majority, all or any")


class LastKCritic:
    name = "lastk"
    Options: ClassVar[type[BaseModel]] = LastKOptions
    reply_contract: ClassVar[type[BaseModel]] = LastKReply

    def __init__(self, model: ChatModel, options: LastKOptions) -> None:
        self.model = model
        self.options = options

    async def __call__(self, task: TaskLike, trajectory: TrajectorySource) -> Verdict:
        started = time.perf_counter()
        info = task_info(task)
        view = await load_view(trajectory, image_side=self.options.image_side)
        frames = view.states()[-self.options.k:]
        labels, images = [], []
        for f in frames:
            img = await view.image(f.step, f.role)
            if img is not None:
                labels.append(f.label)
                images.append(img)
        messages = [
            ChatMessage(role="system", content=render("lastk_system"), cache=True),
            ChatMessage(role="user", content=[
                TextPart(text=render("lastk_user", instruction=info.instruction, platform=info.platform,
                                     frames=labels or ["(no screenshot was recorded)"], final=view.final_line())),
                *images,
            ]),
        ]
        record = LastKRecord(frames=labels, vote=self.options.vote)
        calls = 0
        for i in range(self.options.samples):
            asked = await ask_json(self.model, messages, LastKReply, role="lastk", critic=self.name,
                                   retries=self.options.retries, config=self.options.generate_config())
            calls += len(asked.attempts)
            if asked.value is None:
                record.failures.append(Failure(role="lastk", what=f"sample {i + 1}", attempts=asked.attempts))
                record.samples.append(LastKSample(score=None, reason=asked.error or "", call_ids=asked.call_ids))
            else:
                record.samples.append(LastKSample(score=asked.value.score, reason=asked.value.reason,
                                                  call_ids=asked.call_ids))
        failed = [i for i, s in enumerate(record.samples, start=1) if s.score is None]
        votes = [s.score for s in record.samples if s.score is not None]
        error = (f"{len(failed)} of {len(record.samples)} samples failed ({record.failures[-1].attempts[-1].error})"
                 if failed else None)
        reward = tally(votes, self.options.vote) if error is None else None
        reason = (record.samples[-1].reason if len(record.samples) == 1 and error is None
                  else f"{sum(votes)} of {len(votes)} samples said completed ({self.options.vote} vote)")
        return Verdict(critic=self.name, model=self.model.name, reward=reward, reason=error or reason,
                       task_id=info.task_id, options=self.options.model_dump(), calls=calls,
                       seconds=time.perf_counter() - started, error=error, record=record)
