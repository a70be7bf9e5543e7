"""The comparative MCQ judge: one call over all candidates, one validated index.

Candidates are shown in a seeded random order and the answer is mapped back to the
rollout. With ``permutations > 1`` several orders are judged concurrently and the
majority wins (ties broken by the seeded generator), against position bias. A call that
yields no valid answer after its re-asks casts no vote; with no vote at all the
selection is "no selection" (``chosen=None``), never a guess.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from core.llm import ChatModel
from core.trajectory import Selection

from .calls import cost_of, thoughts_of
from .candidates import Candidate
from .compare import compare
from .config import JudgeConfig

__all__ = ["MCQJudge", "Opening", "draw_seed", "failed_for_good", "opening", "strategy_name"]


def draw_seed(cfg: JudgeConfig) -> int:
    return cfg.seed if cfg.seed is not None else random.SystemRandom().randrange(2**31)


def strategy_name(judge: str, candidates: Sequence[Candidate]) -> str:
    representations = sorted({c.representation for c in candidates}) or ["none"]
    return f"{judge}/{'+'.join(representations)}"


def trivial(strategy: str, candidates: Sequence[Candidate], seed: int) -> Selection | None:
    """The selection when there is nothing to compare (no candidate, or one)."""
    if not candidates:
        return Selection(strategy=strategy, candidates=[], chosen=None, reasoning="no finished rollout to judge",
                         seed=seed)
    if len(candidates) == 1:
        only = candidates[0].rollout
        return Selection(strategy=strategy, candidates=[only], chosen=only,
                         reasoning="only one finished rollout; chosen without a judge call", seed=seed)
    return None


@dataclass(frozen=True, slots=True)
class Opening:
    """What every judge settles before it asks anything: its strategy label, the seed and the
    shuffle drawn from it, and the selection when there is nothing to compare."""

    strategy: str
    seed: int
    rng: random.Random
    settled: Selection | None


def opening(judge: str, cfg: JudgeConfig, candidates: Sequence[Candidate]) -> Opening:
    seed = draw_seed(cfg)
    strategy = strategy_name(judge, candidates)
    return Opening(strategy, seed, random.Random(seed), trivial(strategy, candidates, seed))


class MCQJudge:
    """Behavior Judge's comparative evaluator (module tag ``judge``)."""

    name = "mcq"

    def __init__(self, model: ChatModel, cfg: JudgeConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or JudgeConfig()

    async def __call__(self, task: str, candidates: Sequence[Candidate]) -> Selection:
        start = opening(self.name, self.cfg, candidates)
        if start.settled is not None:
            return start.settled
        strategy, seed, rng = start.strategy, start.seed, start.rng
        indices = list(range(len(candidates)))
        orders = []
        for _ in range(self.cfg.permutations):
            order = list(indices)
            if self.cfg.shuffle:
                rng.shuffle(order)
            orders.append(order)
        asked = await asyncio.gather(*(compare(self.model, task, [candidates[i] for i in order], self.cfg)
                                       for order in orders))
        votes: list[int] = []
        notes: list[str] = []
        failures: list[str] = []
        for order, answer in zip(orders, asked, strict=True):
            shown = [candidates[i].rollout for i in order]
            thoughts = thoughts_of(answer.reply) or answer.reply
            if answer.value is None:
                why = answer.error or answer.problem or "no answer"
                notes.append(f"Order {shown}: no valid answer after {answer.attempts} call(s) ({why}).")
                failures.append(f"order {shown}: {why}")
                continue
            rollout = shown[answer.value - 1]
            votes.append(rollout)
            notes.append(f"Order {shown}: candidate {answer.value} = rollout {rollout}.\n{thoughts}")
        chosen = _majority(votes, rng)
        if len(orders) > 1:
            tally = ", ".join(f"rollout {k}: {v}" for k, v in sorted(Counter(votes).items()))
            notes.append(f"Votes: {tally or 'none'}; chosen: {chosen}.")
        call_ids, dollars = cost_of(list(asked))
        return Selection(strategy=strategy, candidates=[c.rollout for c in candidates], chosen=chosen,
                         reasoning="\n\n".join(notes), seed=seed,
                         permutations=[[candidates[i].rollout for i in order] for order in orders],
                         dollars=dollars, call_ids=call_ids, model=self.model.name,
                         error=failed_for_good(failures) if chosen is None else None)


def failed_for_good(failures: list[str]) -> str:
    """The selection's `error` when no judge call gave a usable answer."""
    return "the judge gave no usable answer: " + "; ".join(failures)


def _majority(votes: list[int], rng: random.Random) -> int | None:
    if not votes:
        return None
    counts = Counter(votes)
    top = max(counts.values())
    tied = sorted(k for k, v in counts.items() if v == top)
    return tied[0] if len(tied) == 1 else rng.choice(tied)
