"""Judges by name, for configs and the command line.

A judge is a class built as ``cls(model, cfg)`` (a `ChatModel` and a `JudgeConfig`) whose
instances are async callables ``(task instruction, candidates) -> Selection``; its ``name``
and its `JudgeConfig` are what a run records. `JUDGES` is the one list of their names: the
run configuration's ``wide.judge``, the ``--judge`` options and their help read it, and a
dotted path ``package.module:Class`` names a judge of your own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from core.llm import ChatModel
from core.registry import Registry
from core.trajectory import Selection

from .candidates import Candidate
from .config import JudgeConfig
from .independent import IndependentJudge
from .mcq import MCQJudge
from .pairwise import PairwiseJudge
from .webjudge import WebJudge

__all__ = ["JUDGES", "Judge", "make_judge", "sees_screens"]


class Judge(Protocol):
    name: str

    async def __call__(self, task: str, candidates: Sequence[Candidate]) -> Selection: ...


def _problem(found: Any) -> str | None:
    if not (isinstance(found, type) and isinstance(getattr(found, "name", None), str) and callable(found)):
        return "not a judge: a class with a name, built as cls(model, cfg) and called with (task, candidates)"
    return None


#: Judge name -> its class. ``bjudge`` is the Behavior Judge of the paper (one MCQ call over
#: the narratives, `MCQJudge`, recorded as ``mcq``); the others are its baselines.
JUDGES: Registry[Any] = Registry("judge", check=_problem, name_of=lambda cls: cls.name)
JUDGES.register("bjudge", MCQJudge, "the Behavior Judge")
JUDGES.register("mcq", MCQJudge, "the same, by its call's name")
JUDGES.register("pairwise", PairwiseJudge, "n-1 comparisons")
JUDGES.register("independent", IndependentJudge, "a 1-5 rubric each")
JUDGES.register("webjudge", WebJudge, "key points and key screenshots")


def make_judge(name: str, model: ChatModel, cfg: JudgeConfig | None = None) -> Judge:
    """``mcq`` (one call), ``pairwise`` (n-1 calls), ``independent`` (n calls),
    ``webjudge`` (key points, a call per screenshot, n outcome calls), or a judge of your
    own by dotted path; an unknown name is a `ValueError` listing the names."""
    judge: Judge = JUDGES.get(name)(model, cfg)
    return judge


def sees_screens(name: str) -> bool:
    """Whether the judge `name` looks at screenshots besides the narratives (its class says
    so with ``sees_screens = True``), so its model must take images."""
    return bool(getattr(JUDGES.get(name), "sees_screens", False))
