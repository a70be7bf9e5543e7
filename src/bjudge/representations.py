"""How a finished rollout is shown to a judge: behavior narrative (the method) or one of
the ablation baselines, screenshots only, a trajectory summary, or naive captions.

Every representation reads a rollout through `core.trajectory.RolloutDir` (blocking
reads go to a thread) and returns a `Candidate`. Model calls made to build a
representation are tagged ``narrative`` and cached by content like facts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from core.llm import ChatMessage, ChatModel, ImagePart, Part, TextPart
from core.replies import ReplyProblem
from core.trajectory import RolloutDir, RolloutInfo, Step

from .augment import digest
from .builder import NarrativeBuilder
from .cache import FactCache, cache_key
from .calls import ask
from .candidates import Candidate, shown_png
from .config import NarrativeConfig, RepresentationConfig
from .parsing import read_section
from .prompts import prompt_version, render

__all__ = [
    "REPRESENTATIONS",
    "Representation",
    "Representer",
    "ending_of",
    "frame_indices",
    "make_representer",
    "narrate_rollout",
]

Representation = Literal["narrative", "screenshots", "summary", "captions"]
REPRESENTATIONS: tuple[str, ...] = get_args(Representation)
#: Transitions of one rollout read and narrated at once when narrating from disk.
_READ_AHEAD = 4

_ENDINGS = {
    "done": "the agent declared the task complete.",
    "failed": "the agent declared the task impossible.",
    "step_limit": "the step budget ran out before the agent declared an end.",
    "cost_limit": "the cost budget ran out before the agent declared an end.",
    "format_error": "the agent's replies kept failing to parse, so it was stopped.",
    "environment_lost": "the environment was lost.",
    "errored": "the rollout stopped on an error.",
    "setup_failed": "the task could not be set up, so the agent never started.",
}


def ending_of(info: RolloutInfo | None) -> str | None:
    """How a rollout ended, in words the judge may see (never its evaluator score)."""
    return _ENDINGS.get(info.status) if info is not None else None


def frame_indices(count: int, wanted: int) -> list[int]:
    """`wanted` positions evenly spaced over `count` frames, first and last included."""
    if count <= 0:
        return []
    if wanted >= count:
        return list(range(count))
    if wanted <= 1:
        return [count - 1]
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})


@dataclass(frozen=True)
class _Rollout:
    info: RolloutInfo | None
    steps: list[Step]
    #: (label, step, role) of each distinct screen: the start, then each step's after.
    frames: list[tuple[str, Step, str]]


def _read(rd: RolloutDir) -> _Rollout:
    steps = list(rd.iter_steps())
    frames: list[tuple[str, Step, str]] = []
    if steps and steps[0].before_screenshot:
        frames.append(("Start screen", steps[0], "before"))
    for step in steps:
        if step.after_screenshot:
            frames.append((f"After step {step.index + 1}", step, "after"))
    return _Rollout(info=rd.read_info(), steps=steps, frames=frames)


def _actions_text(steps: Sequence[Step]) -> str:
    lines = []
    for step in steps:
        kind = (step.action or {}).get("kind", (step.action or {}).get("type", "no action"))
        code = (step.code or "").strip().replace("\n", "; ")[:300]
        lines.append(f"Step {step.index + 1}: {kind}" + (f" -- {code}" if code else ""))
        if step.code_agent:
            summary = str(step.code_agent.get("summary", ""))[:600]
            lines.append(f"  coding agent: {step.code_agent.get('reason', '?')}; {summary}")
    return "\n".join(lines) or "(no steps)"


class Representer:
    """Builds candidates of one representation for a task's rollouts."""

    def __init__(self, name: Representation, model: ChatModel | None, cache: FactCache,
                 narrative: NarrativeConfig | None = None, cfg: RepresentationConfig | None = None) -> None:
        if name not in REPRESENTATIONS:
            raise ValueError(f"unknown representation {name!r}: choose one of {', '.join(REPRESENTATIONS)}")
        if name != "screenshots" and model is None:
            raise ValueError(f"the {name} representation needs a model to build it")
        self.name = name
        self.model = model
        self.cache = cache
        self.narrative_cfg = narrative or NarrativeConfig()
        self.cfg = cfg or RepresentationConfig()

    def builder(self) -> NarrativeBuilder:
        """A narrative builder sharing this representer's model, cache and settings."""
        if self.model is None:
            raise ValueError("narratives need a model")
        return NarrativeBuilder(self.model, self.cache, self.narrative_cfg)

    async def candidates(self, task: str, rollouts: Sequence[RolloutDir],
                         builder: NarrativeBuilder | None = None) -> list[Candidate]:
        """One candidate per rollout, in the given order, built concurrently. For
        narratives, pass `builder` to read the narratives afterwards."""
        if self.name == "narrative":
            builder = builder or self.builder()
            return list(await asyncio.gather(*(narrate_rollout(builder, rd) for rd in rollouts)))
        per = max(1, self.cfg.screenshot_budget // max(1, len(rollouts)))
        return list(await asyncio.gather(*(self._one(task, rd, per) for rd in rollouts)))

    async def _one(self, task: str, rd: RolloutDir, per_rollout: int) -> Candidate:
        rollout = await asyncio.to_thread(_read, rd)
        if self.name == "screenshots":
            parts = await asyncio.to_thread(self._frames, rd, rollout, frame_indices(len(rollout.frames), per_rollout))
        elif self.name == "summary":
            parts = await self._summary(task, rd, rollout)
        else:
            parts = await self._captions(rd, rollout)
        ending = ending_of(rollout.info)
        if ending:
            parts.append(TextPart(text=f"How the rollout ended: {ending}"))
        return Candidate(rollout=rd.index, parts=parts, representation=self.name)

    def _png(self, rd: RolloutDir, step: Step, role: str) -> bytes:
        data = rd.read_screenshot(step, role)
        assert data is not None
        return shown_png(data, self.cfg.longest_side, self.cfg.png_level)

    def _frames(self, rd: RolloutDir, rollout: _Rollout, picks: list[int]) -> list[Part]:
        parts: list[Part] = []
        for i in picks:
            label, step, role = rollout.frames[i]
            parts += [TextPart(text=f"{label}:"), ImagePart(data=self._png(rd, step, role), detail="high")]
        return parts

    async def _summary(self, task: str, rd: RolloutDir, rollout: _Rollout) -> list[Part]:
        assert self.model is not None
        picks = frame_indices(len(rollout.frames), self.cfg.summary_frames)
        images = await asyncio.to_thread(self._frames, rd, rollout, picks)
        actions = _actions_text(rollout.steps)
        key = cache_key("summary", prompt_version("summary_system", "format_retry"), self.model.name, self.cfg,
                        task, actions, [digest(p.data) for p in images if isinstance(p, ImagePart)])
        text = await self._cached(key, [
            ChatMessage(role="system", content=render("summary_system"), cache=True),
            ChatMessage(role="user", content=[TextPart(text=f"User request: {task}\n\nActions:\n{actions}"), *images]),
        ], "summary")
        return [TextPart(text=f"Summary of the trajectory: {text or '(no summary could be produced)'}")]

    async def _captions(self, rd: RolloutDir, rollout: _Rollout) -> list[Part]:
        picks = list(range(len(rollout.frames)))
        pngs = await asyncio.to_thread(lambda: [self._png(rd, s, r) for _, s, r in rollout.frames])

        async def caption(png: bytes) -> str:
            assert self.model is not None
            key = cache_key("caption", prompt_version("caption_system", "format_retry"), self.model.name,
                            self.cfg.longest_side, digest(png))
            return await self._cached(key, [
                ChatMessage(role="system", content=render("caption_system"), cache=True),
                ChatMessage(role="user", content=[ImagePart(data=png, detail="high"),
                                                  TextPart(text="Describe this screenshot.")]),
            ], "caption")

        captions = await asyncio.gather(*(caption(pngs[i]) for i in picks))
        parts: list[Part] = []
        if pngs:
            parts += [TextPart(text="Initial screen:"), ImagePart(data=pngs[0], detail="high")]
        lines = [f"{rollout.frames[i][0]}: {captions[n] or '(no caption)'}" for n, i in enumerate(picks)]
        parts.append(TextPart(text="Captions of each screen, in order:\n" + "\n".join(lines)))
        if len(pngs) > 1:
            parts += [TextPart(text="Final screen:"), ImagePart(data=pngs[-1], detail="high")]
        return parts

    async def _cached(self, key: str, messages: list[ChatMessage], tag: str) -> str:
        hit = self.cache.get(key)
        if hit is not None:
            return str(hit.get("text", ""))
        assert self.model is not None

        def parse(text: str) -> tuple[str | None, str | None]:
            try:
                body = read_section(text, tag)
            except ReplyProblem as exc:
                return None, str(exc)
            return (body, None) if body else (None, f"the <{tag}> section is empty")

        asked = await ask(self.model, messages, module="narrative", parse=parse,
                          instruction=f"Reply with <{tag}>...</{tag}>.", max_reasks=self.cfg.max_format_retries,
                          config=self.cfg.generate)
        if asked.value is not None:  # a failure is never cached: a later pass asks again
            self.cache.put(key, {"text": asked.value})
        return asked.value or ""


async def narrate_rollout(builder: NarrativeBuilder, rd: RolloutDir) -> Candidate:
    """Narrate every step of a finished rollout on disk (cached facts cost nothing) and
    return its narrative candidate."""
    rollout = await asyncio.to_thread(_read, rd)
    reading = asyncio.Semaphore(_READ_AHEAD)

    async def one(step: Step) -> None:
        async with reading:  # bounds the screenshots held in memory at once
            pngs = await asyncio.to_thread(lambda: (rd.read_screenshot(step, "before"),
                                                    rd.read_screenshot(step, "after")))
            before, after = pngs
            if before is None:
                return
            await builder.add_transition(rd.index, step, before, after)

    await asyncio.gather(*(one(step) for step in rollout.steps))
    return await builder.candidate(rd.index, ending=ending_of(rollout.info))


def make_representer(name: str, model: ChatModel | None, cache: FactCache,
                     narrative: NarrativeConfig | None = None,
                     cfg: RepresentationConfig | None = None) -> Representer:
    """A representation by name: ``narrative``, ``screenshots``, ``summary`` or ``captions``."""
    return Representer(name, model, cache, narrative, cfg)  # type: ignore[arg-type]
