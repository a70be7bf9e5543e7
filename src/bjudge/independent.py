"""Baseline: independent scoring, WebJudge-style (n judge calls).

Each candidate is rated 1-5 on its own, without seeing the others; the highest score
wins and ties are broken by the seeded generator. A candidate without a valid score
after the re-asks is left out; with no score at all there is no selection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from core.llm import ChatMessage, ChatModel, Part, TextPart
from core.trajectory import Selection

from .calls import Asked, ask, cost_of, thoughts_of
from .candidates import Candidate
from .config import JudgeConfig
from .mcq import failed_for_good, opening
from .parsing import AnswerReply, parse_choice
from .prompts import render

__all__ = ["IndependentJudge"]


class IndependentJudge:
    name = "independent"

    def __init__(self, model: ChatModel, cfg: JudgeConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or JudgeConfig()

    async def score(self, task: str, candidate: Candidate) -> Asked[int]:
        parts: list[Part] = [TextPart(text="===== The attempt ====="), *candidate.parts,
                             TextPart(text="Rate the attempt as instructed; end with <answer>s</answer>, s from 1 to 5.")]
        messages = [ChatMessage(role="system", content=render("score_system", task=task)),
                    ChatMessage(role="user", content=parts)]

        def parse(text: str) -> tuple[int | None, str | None]:
            choice = parse_choice(text, 1, 5)
            return choice.value, choice.problem

        return await ask(self.model, messages, module="judge", parse=parse,
                         instruction="End your reply with <answer>s</answer>, s one integer from 1 to 5.",
                         max_reasks=self.cfg.max_reasks, config=self.cfg.generate, contract=AnswerReply)

    async def __call__(self, task: str, candidates: Sequence[Candidate]) -> Selection:
        start = opening(self.name, self.cfg, candidates)
        if start.settled is not None:
            return start.settled
        strategy, seed, rng = start.strategy, start.seed, start.rng
        asked = await asyncio.gather(*(self.score(task, c) for c in candidates))
        scores: dict[int, int] = {}
        notes: list[str] = []
        failures: list[str] = []
        for candidate, answer in zip(candidates, asked, strict=True):
            if answer.value is None:
                why = answer.error or answer.problem or "no answer"
                notes.append(f"Rollout {candidate.rollout}: no valid score ({why}).")
                failures.append(f"rollout {candidate.rollout}: {why}")
                continue
            scores[candidate.rollout] = answer.value
            thoughts = thoughts_of(answer.reply) or answer.reply
            notes.append(f"Rollout {candidate.rollout}: score {answer.value}.\n{thoughts}")
        chosen: int | None = None
        if scores:
            best = max(scores.values())
            tied = sorted(k for k, v in scores.items() if v == best)
            chosen = tied[0] if len(tied) == 1 else rng.choice(tied)
            if len(tied) > 1:
                notes.append(f"Rollouts {tied} tie at {best}; the seeded draw chose {chosen}.")
        call_ids, dollars = cost_of(list(asked))
        return Selection(strategy=strategy, candidates=[c.rollout for c in candidates], chosen=chosen,
                         reasoning="\n\n".join(notes), seed=seed, dollars=dollars, call_ids=call_ids,
                         model=self.model.name, error=None if scores else failed_for_good(failures))
