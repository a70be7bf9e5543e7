"""Baseline: WebJudge-style independent scoring, as the paper adapts it to pick among N
rollouts (its Figure 4 and Table 1's WebJudge row).

Three stages, each attempt judged on its own: the request's key points (one call per
task); every screenshot of an attempt scored 1-5 for the evidence it holds about them (one
call per screenshot), keeping those at or above `key_screen_threshold` with what was seen
in them; then the outcome, scored 1-5 from the attempt's text and its key screenshots. The
highest score wins, ties broken by the seeded generator. An attempt without a valid
outcome score is left out; with none at all there is no selection and `error` says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from core.llm import ChatMessage, ChatModel, ImagePart, Part, TextPart
from core.replies import ReplyProblem
from core.trajectory import Selection

from .calls import Asked, ask, cost_of, thoughts_of
from .candidates import Candidate
from .config import JudgeConfig
from .mcq import failed_for_good, opening
from .parsing import AnswerReply, KeyPointsReply, parse_choice, read_items
from .prompts import render

__all__ = ["WebJudge"]

_SCORE = "End your reply with <answer>s</answer>, s one integer from 1 to 5."


def _score(text: str) -> tuple[int | None, str | None]:
    choice = parse_choice(text, 1, 5)
    return choice.value, choice.problem


class WebJudge:
    name = "webjudge"
    #: It reads key screenshots, so its model must take images (`agent-s3 models check`).
    sees_screens = True

    def __init__(self, model: ChatModel, cfg: JudgeConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or JudgeConfig()

    async def key_points(self, task: str) -> Asked[list[str]]:
        def parse(text: str) -> tuple[list[str] | None, str | None]:
            try:
                found = read_items(text, "key_points")
            except ReplyProblem as exc:
                return None, str(exc)
            return (found, None) if found else (None, "the <key_points> list is empty; name every requirement")

        messages = [ChatMessage(role="user", content=render("webjudge_key_points", task=task))]
        return await ask(self.model, messages, module="judge", parse=parse,
                         instruction="Reply with <key_points>...</key_points>, one requirement per line.",
                         max_reasks=self.cfg.max_reasks, config=self.cfg.generate, contract=KeyPointsReply)

    async def _screen(self, task: str, points: list[str], image: ImagePart) -> Asked[int]:
        messages = [ChatMessage(role="user", content=[TextPart(text=render("webjudge_screen", task=task,
                                                                           key_points=points)), image])]
        return await ask(self.model, messages, module="judge", parse=_score, instruction=_SCORE,
                         max_reasks=self.cfg.max_reasks, config=self.cfg.generate, contract=AnswerReply)

    async def outcome(self, task: str, points: list[str], candidate: Candidate) -> list[Asked[int]]:
        """The screen scores, then the outcome score (last) of one attempt."""
        text = [p for p in candidate.parts if isinstance(p, TextPart)]
        images = [p for p in candidate.parts if isinstance(p, ImagePart)]
        screens = list(await asyncio.gather(*(self._screen(task, points, image) for image in images)))
        kept: list[Part] = []
        for n, (image, judged) in enumerate(zip(images, screens, strict=True), start=1):
            if judged.value is not None and judged.value >= self.cfg.key_screen_threshold:
                seen = thoughts_of(judged.reply)
                kept += [TextPart(text=f"Key screenshot {n} (evidence {judged.value}/5): {seen}"), image]
        parts: list[Part] = [TextPart(text="===== The attempt ====="), *text,
                             TextPart(text=f"===== Key screenshots ({len(kept) // 2} of {len(images)}) ====="),
                             *kept, TextPart(text="Score the attempt as instructed. " + _SCORE)]
        messages = [ChatMessage(role="system", content=render("webjudge_outcome", task=task, key_points=points)),
                    ChatMessage(role="user", content=parts)]
        final = await ask(self.model, messages, module="judge", parse=_score, instruction=_SCORE,
                          max_reasks=self.cfg.max_reasks, config=self.cfg.generate, contract=AnswerReply)
        return [*screens, final]

    async def __call__(self, task: str, candidates: Sequence[Candidate]) -> Selection:
        start = opening(self.name, self.cfg, candidates)
        if start.settled is not None:
            return start.settled
        strategy, seed, rng = start.strategy, start.seed, start.rng
        points = await self.key_points(task)
        asked: list[Asked[int]] = []
        if points.value is None:
            ids, dollars = cost_of([points])
            why = points.error or points.problem or "no key points"
            return Selection(strategy=strategy, candidates=[c.rollout for c in candidates], chosen=None,
                             reasoning=f"No key points: {why}", seed=seed, dollars=dollars, call_ids=ids,
                             model=self.model.name, error=failed_for_good([f"key points: {why}"]))
        judged = await asyncio.gather(*(self.outcome(task, points.value, c) for c in candidates))
        scores: dict[int, int] = {}
        notes = ["Key points:\n" + "\n".join(f"- {p}" for p in points.value)]
        failures: list[str] = []
        for candidate, calls in zip(candidates, judged, strict=True):
            asked += calls
            final = calls[-1]
            if final.value is None:
                why = final.error or final.problem or "no answer"
                notes.append(f"Rollout {candidate.rollout}: no valid score ({why}).")
                failures.append(f"rollout {candidate.rollout}: {why}")
                continue
            scores[candidate.rollout] = final.value
            notes.append(f"Rollout {candidate.rollout}: score {final.value}.\n"
                         f"{thoughts_of(final.reply) or final.reply}")
        chosen: int | None = None
        if scores:
            best = max(scores.values())
            tied = sorted(k for k, v in scores.items() if v == best)
            chosen = tied[0] if len(tied) == 1 else rng.choice(tied)
            if len(tied) > 1:
                notes.append(f"Rollouts {tied} tie at {best}; the seeded draw chose {chosen}.")
        point_ids, point_dollars = cost_of([points])
        call_ids, dollars = cost_of(asked)
        call_ids, dollars = point_ids + call_ids, point_dollars + dollars
        return Selection(strategy=strategy, candidates=[c.rollout for c in candidates], chosen=chosen,
                         reasoning="\n\n".join(notes), seed=seed, dollars=dollars, call_ids=call_ids,
                         model=self.model.name, error=None if scores else failed_for_good(failures))
