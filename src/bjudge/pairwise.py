"""Baseline: the iterative pairwise tournament (n-1 judge calls).

The candidates are put in a seeded random order; the first is the champion and meets
each next one in a two-candidate comparison (which of the two is shown first is drawn
too); the winner stays. A match without a valid answer keeps the champion. The paper
finds it no better than one MCQ call while costing n-1 calls and ~2(n-1) candidates of
tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.llm import ChatModel
from core.trajectory import Selection

from .calls import Asked, cost_of, thoughts_of
from .candidates import Candidate
from .compare import compare
from .config import JudgeConfig
from .mcq import failed_for_good, opening

__all__ = ["PairwiseJudge"]


class PairwiseJudge:
    name = "pairwise"

    def __init__(self, model: ChatModel, cfg: JudgeConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or JudgeConfig()

    async def __call__(self, task: str, candidates: Sequence[Candidate]) -> Selection:
        start = opening(self.name, self.cfg, candidates)
        if start.settled is not None:
            return start.settled
        strategy, seed, rng = start.strategy, start.seed, start.rng
        order = list(candidates)
        if self.cfg.shuffle:
            rng.shuffle(order)
        champion = order[0]
        asked: list[Asked[int]] = []
        shown_orders: list[list[int]] = []
        notes: list[str] = []
        decided = False
        failures: list[str] = []
        for challenger in order[1:]:
            pair = [champion, challenger]
            if self.cfg.shuffle and rng.random() < 0.5:
                pair.reverse()
            answer = await compare(self.model, task, pair, self.cfg)
            asked.append(answer)
            shown_orders.append([c.rollout for c in pair])
            label = f"Rollout {pair[0].rollout} vs rollout {pair[1].rollout}"
            if answer.value is None:
                why = answer.error or answer.problem or "no answer"
                notes.append(f"{label}: no valid answer ({why}); rollout {champion.rollout} stays.")
                failures.append(f"{label.lower()}: {why}")
                continue
            decided = True
            champion = pair[answer.value - 1]
            thoughts = thoughts_of(answer.reply) or answer.reply
            notes.append(f"{label}: rollout {champion.rollout} wins.\n{thoughts}")
        call_ids, dollars = cost_of(asked)
        return Selection(strategy=strategy, candidates=[c.rollout for c in candidates],
                         chosen=champion.rollout if decided else None, reasoning="\n\n".join(notes),
                         seed=seed, permutations=shown_orders, dollars=dollars, call_ids=call_ids,
                         model=self.model.name, error=None if decided else failed_for_good(failures))
