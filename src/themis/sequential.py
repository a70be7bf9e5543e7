"""Sequential state checking (DigiRL-style): ask about each screen after each step, in
order, and stop at the first one that shows the task done. Screens that look like one of
the last few asked about are skipped without a call."""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar

from PIL import Image, ImageChops, ImageStat
from pydantic import BaseModel

from core.images import decode_png
from core.llm import ChatMessage, ChatModel, ImagePart, TextPart

from .asking import ask_json
from .options import SequentialOptions
from .prompts import render
from .record import Failure, SequentialCheck, SequentialRecord, Verdict
from .schemas import SequentialReply
from .view import TaskLike, TrajectorySource, load_view, task_info

__all__ = ["SequentialCritic", "screen_distance"]


def _thumb(part: ImagePart) -> Image.Image:
    return decode_png(part.data).convert("L").resize((64, 64), Image.Resampling.BILINEAR)


def screen_distance(a: Image.Image, b: Image.Image) -> float:
    """Mean squared difference of two 64x64 grey thumbnails (0 for identical screens)."""
    stat = ImageStat.Stat(ImageChops.difference(a, b))
    return float(stat.sum2[0]) / (a.width * a.height)


class SequentialCritic:
    name = "sequential"
    Options: ClassVar[type[BaseModel]] = SequentialOptions
    reply_contract: ClassVar[type[BaseModel]] = SequentialReply

    def __init__(self, model: ChatModel, options: SequentialOptions) -> None:
        self.model = model
        self.options = options

    async def __call__(self, task: TaskLike, trajectory: TrajectorySource) -> Verdict:
        started = time.perf_counter()
        info = task_info(task)
        view = await load_view(trajectory, image_side=self.options.image_side)
        states = view.states()
        # The screens after the agent's actions; the first screen only when there is no other.
        frames = states[1:] or states
        record = SequentialRecord()
        recent: list[Image.Image] = []
        calls, reward, reason = 0, 0, "no screen showed the task completed"
        for n, frame in enumerate(frames, start=1):
            image = await view.image(frame.step, frame.role)
            if image is None:
                continue
            thumb = await asyncio.to_thread(_thumb, image)
            if self.options.skip_repeats and any(
                screen_distance(thumb, seen) <= self.options.repeat_threshold for seen in recent
            ):
                record.checks.append(SequentialCheck(frame=frame.label, satisfied=None, skipped=True,
                                                     reason="same as a recent screen"))
                continue
            recent = [*recent, thumb][-self.options.repeat_window:]
            messages = [
                ChatMessage(role="system", content=render("sequential_system"), cache=True),
                ChatMessage(role="user", content=[
                    TextPart(text=render("sequential_user", instruction=info.instruction, platform=info.platform,
                                         frame=frame.label, position=f"screen {n} of {len(frames)}",
                                         final=view.final_line())),
                    image,
                ]),
            ]
            asked = await ask_json(self.model, messages, SequentialReply, role="sequential", critic=self.name,
                                   retries=self.options.retries, config=self.options.generate_config())
            calls += len(asked.attempts)
            if asked.value is None:
                record.failures.append(Failure(role="sequential", what=frame.label, attempts=asked.attempts))
                record.checks.append(SequentialCheck(frame=frame.label, satisfied=None, reason=asked.error or "",
                                                     call_ids=asked.call_ids))
                continue
            record.checks.append(SequentialCheck(frame=frame.label, satisfied=asked.value.satisfied,
                                                 reason=asked.value.reason, call_ids=asked.call_ids))
            if asked.value.satisfied:
                reward, reason = 1, f"{frame.label}: {asked.value.reason}"
                break
        error = None
        if not reward and record.failures:
            # A screen that could not be asked about might have shown the task done.
            error = (f"{len(record.failures)} screens could not be checked "
                     f"({record.failures[-1].attempts[-1].error if record.failures[-1].attempts else 'no call'})")
        return Verdict(critic=self.name, model=self.model.name, reward=None if error else (1 if reward else 0),
                       reason=error or reason, task_id=info.task_id, options=self.options.model_dump(),
                       calls=calls, seconds=time.perf_counter() - started, error=error, record=record)
