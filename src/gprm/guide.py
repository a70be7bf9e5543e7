"""The step guides: GUI-PRA (dynamic memory, adaptive UI perception, rubric scoring with the
previous step's pick in context) and the standard PRM baseline (the full raw history, no
tools, no memory). Both score every candidate concurrently and return the argmax, ties
going to the policy's earlier candidate. One guide serves one rollout: GUI-PRA carries its
summary and the previous pick from step to step.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ValidationError

from core.llm import ChatModel
from core.ocr import OcrBackend
from core.registry import Registry
from gprm.elements import elements_text, shrink_png
from gprm.history import Candidate, HistoryStep, history_lines
from gprm.memory import DynamicMemory
from gprm.options import GuiPraOptions, PrmOptions
from gprm.pointing import Convention
from gprm.records import CandidateScore, GuideDecision, GuideRecord, MemoryRecord, RoutingRecord
from gprm.routing import Router
from gprm.scoring import CALL_FAILED, ScoreContext, Scorer
from gprm.tools import PARSER_TOOL, Perception, PointMode
from gprm.uiparser import ParserError, TreeSource, UIParser, make_parser

__all__ = ["GUIDES", "GuiPra", "Pick", "StandardPrm", "StepGuide", "check_guide_options", "guide_error",
           "guide_options_model", "guide_takes", "make_guide", "pick"]


class StepGuide(Protocol):
    name: str

    async def choose(self, goal: str, screenshot: bytes, history: list[HistoryStep],
                     candidates: list[Candidate]) -> GuideDecision: ...

    def reset(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Pick:
    """The argmax of one step: the chosen index, and why the guide fell back when it could
    not choose (no candidate was scored)."""

    index: int
    fallback_reason: str | None = None

    @property
    def fallback(self) -> bool:
        return self.fallback_reason is not None


def pick(scores: list[CandidateScore]) -> Pick:
    """The highest score, the earliest on ties. When no candidate was scored the policy's
    first is taken and the pick says so, with each candidate's error: an unscored candidate
    never counts as a 0."""
    best: int | None = None
    for i, s in enumerate(scores):
        if s.score is None:
            continue
        top = scores[best].score if best is not None else None
        if top is None or s.score > top:
            best = i
    if best is not None:
        return Pick(best)
    reasons = sorted({(s.error or "no reply was read").split("\n")[0][:200] for s in scores})
    return Pick(0, f"no candidate could be scored ({'; '.join(reasons)}); the policy's first candidate was taken")


def guide_error(scores: list[CandidateScore], *, memory: MemoryRecord | None = None,
                routing: RoutingRecord | None = None, fallback_reason: str | None = None) -> str | None:
    """One line naming every call of this step that failed for good, or None. Unreadable
    replies of a scored step are the candidates' own errors; a step no candidate could be
    scored in is a guide error whatever the cause."""
    problems: list[str] = []
    if memory is not None and memory.error:
        problems.append(f"memory: {memory.error}")
    if routing is not None:
        if routing.error:
            problems.append(f"routing: {routing.error}")
        problems += [f"tool {t.name}: {t.error}" for t in routing.tools if t.error]
    failed = [s for s in scores if s.error and s.error.startswith(CALL_FAILED)]
    if failed:
        problems.append(f"scoring: {len(failed)} of {len(scores)} calls failed ({failed[0].error})")
    if fallback_reason and not failed:
        problems.append(fallback_reason)
    return "; ".join(p.replace("\n", " ")[:400] for p in problems) or None


def _check(candidates: list[Candidate]) -> None:
    if not candidates:
        raise ValueError("the guide needs at least one candidate")


class GuiPra:
    """GUI-PRA. `parser` is a UI parser, "auto" (the platform's element tree when `tree`
    fetches it, else OCR and outlines), "tree", "local", "omniparser" (the paper's, with
    `parser_url`) or None (no parser tool); `pointer` is a pointing model for the Point tool
    (without one it points by matching the description against the parser's elements)."""

    name = "gprm"
    Options: ClassVar[type[BaseModel]] = GuiPraOptions
    #: What the run passes besides the options: the element tree's fetch, the pointing model.
    runtime: ClassVar[tuple[str, ...]] = ("tree", "pointer")

    def __init__(self, model: ChatModel, *, parser: UIParser | str | None = "auto", ocr: OcrBackend | None = None,
                 tree: TreeSource | None = None,
                 parser_url: str | None = None, pointer: ChatModel | None = None, point_mode: PointMode = "auto",
                 point_coordinates: Convention | Literal["profile"] = "percent",
                 memory: bool = True, memory_threshold: int = 5, fallback_recent: int = 3, tools: bool = True,
                 max_tool_calls: int = 2, max_reasks: int = 1, image_side: int | None = 1280,
                 prefetch: bool = True, action_space: str | None = None, point: bool = True) -> None:
        self.model = model
        #: The agent's action reference, shown to the scorer (the rubric's "action space").
        self.action_space = action_space
        #: False drops the Point tool (the paper's ablation without Point).
        self.point = point
        if parser == "auto":
            parser = "tree" if tree is not None else "local"
        if isinstance(parser, str):
            parser = make_parser(parser, ocr=ocr, url=parser_url, tree=tree)
        self.parser = parser
        self.pointer = pointer
        self.point_mode: PointMode = point_mode
        #: The space the pointing prompt declares: "percent" (Molmo's), or "profile" for the
        #: pointing model's own convention.
        self.point_coordinates = point_coordinates
        self.use_memory = memory
        self.memory_threshold, self.fallback_recent = memory_threshold, fallback_recent
        self.memory = DynamicMemory(model, threshold=memory_threshold, fallback_recent=fallback_recent)
        self.tools = tools
        self.router = Router(model, max_calls=max_tool_calls, image_side=image_side)
        self.scorer = Scorer(model, prompt="score", max_reasks=max_reasks, image_side=image_side)
        self.image_side = image_side
        #: Parse the screen in the background while memory and routing calls run.
        self.prefetch = prefetch
        self.previous: dict[str, Any] | None = None

    def reset(self) -> None:
        self.memory = DynamicMemory(self.model, threshold=self.memory_threshold, fallback_recent=self.fallback_recent)
        self.previous = None

    async def choose(self, goal: str, screenshot: bytes, history: list[HistoryStep],
                     candidates: list[Candidate]) -> GuideDecision:
        _check(candidates)
        started = time.perf_counter()
        perception = Perception(screenshot, parser=self.parser, pointer=self.pointer, point_mode=self.point_mode,
                                point_coordinates=self.point_coordinates, image_side=self.image_side, point=self.point)
        use_tools = self.tools and self.router.max_calls > 0 and bool(perception.available())
        if use_tools and self.prefetch:
            perception.prefetch()
        try:
            return await self._choose(goal, screenshot, history, candidates, perception, use_tools, started)
        finally:
            await perception.close()

    async def _choose(self, goal: str, screenshot: bytes, history: list[HistoryStep], candidates: list[Candidate],
                      perception: Perception, use_tools: bool, started: float) -> GuideDecision:
        memory_record = None
        if self.use_memory:
            sent = (await asyncio.to_thread(shrink_png, screenshot, self.image_side)
                    if len(history) > self.memory_threshold else None)
            condensed = await self.memory.condense(goal, history, sent)
            summary, recent, memory_record = condensed.summary, condensed.lines(), condensed.record
        else:
            summary, recent = None, history_lines(history)
        routing_record, images = None, {}
        if use_tools:
            context = "\n".join(([f"Earlier work (summary): {summary}"] if summary else []) + recent)
            routed = await self.router.gather(goal, context, candidates, perception)
            routing_record, images = routed.record, routed.images
        elements = await self._elements(perception) if use_tools else None
        evidence = [f"{use.name}: {PARSED if use.name == PARSER_TOOL and use.ok and elements else use.evidence}"
                    for use in (routing_record.tools if routing_record else [])]
        labels = {"ui_parser": "the UI parser's numbered elements", "point": "the point tool's star"}
        ctx = ScoreContext(goal=goal, screenshot=screenshot, recent=recent, summary=summary, evidence=evidence,
                           images=[(labels.get(k, k), png) for k, png in images.items() if png],
                           previous=self.previous, action_space=self.action_space, elements=elements)
        await self.scorer.prepare(ctx)
        scores = list(await asyncio.gather(*(self.scorer.score(i, c, ctx) for i, c in enumerate(candidates))))
        chosen = pick(scores)
        index = chosen.index
        error = guide_error(scores, memory=memory_record, routing=routing_record, fallback_reason=chosen.fallback_reason)
        record = GuideRecord(guide=self.name, chosen=index, chosen_score=scores[index].score, fallback=chosen.fallback,
                             fallback_reason=chosen.fallback_reason, error=error, candidates=scores,
                             memory=memory_record, routing=routing_record, previous=self.previous,
                             seconds=time.perf_counter() - started)
        self.previous = {"action": candidates[index].action, "score": scores[index].score}
        return GuideDecision(index, candidates[index], record, images)


    @staticmethod
    async def _elements(perception: Perception) -> str | None:
        """The screen's element list for the scorer (the paper's e_t), when the parse worked."""
        try:
            screen = await perception.parsed()
        except ParserError:
            return None
        return None if screen is None else elements_text(screen.elements)


#: What the scorer reads for a UI-parser call whose element list it is shown anyway.
PARSED = "ran; its element list is given above and its numbered overlay is attached"


class StandardPrm:
    """The baseline: each candidate scored against the full raw history and the screenshot."""

    name = "prm"
    Options: ClassVar[type[BaseModel]] = PrmOptions

    def __init__(self, model: ChatModel, *, max_reasks: int = 1, image_side: int | None = 1280) -> None:
        self.scorer = Scorer(model, prompt="prm", max_reasks=max_reasks, image_side=image_side)

    def reset(self) -> None:
        """Stateless between steps."""

    async def choose(self, goal: str, screenshot: bytes, history: list[HistoryStep],
                     candidates: list[Candidate]) -> GuideDecision:
        _check(candidates)
        started = time.perf_counter()
        ctx = ScoreContext(goal=goal, screenshot=screenshot, recent=history_lines(history))
        await self.scorer.prepare(ctx)
        scores = list(await asyncio.gather(*(self.scorer.score(i, c, ctx) for i, c in enumerate(candidates))))
        chosen = pick(scores)
        index = chosen.index
        record = GuideRecord(guide=self.name, chosen=index, chosen_score=scores[index].score, fallback=chosen.fallback,
                             fallback_reason=chosen.fallback_reason,
                             error=guide_error(scores, fallback_reason=chosen.fallback_reason),
                             candidates=scores, seconds=time.perf_counter() - started)
        return GuideDecision(index, candidates[index], record)


def _problem(found: Any) -> str | None:
    if not (isinstance(found, type) and isinstance(getattr(found, "name", None), str)):
        return "not a guide: a class with a name and an Options model, built as cls(model, **options)"
    options = getattr(found, "Options", None)
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        return "a guide class needs Options, the pydantic model of its settings"
    return None


#: Guide name -> its class: a class with a ``name``, its settings as ``Options`` (a pydantic
#: model) and optionally ``runtime``, the names of the run's objects it takes (``tree``,
#: ``pointer``); built as ``cls(model, **options, **runtime)``. The run configuration's
#: ``guide.name`` and ``--guide`` read the names; a dotted path names a guide of your own.
GUIDES: Registry[Any] = Registry("guide", check=_problem, name_of=lambda cls: cls.name)
GUIDES.register("gprm", GuiPra, "GUI-PRA")
GUIDES.register("prm", StandardPrm, "the standard PRM")


def guide_options_model(name: str) -> type[BaseModel]:
    """The settings model of the guide `name` (an unknown name is a `ValueError`)."""
    options: type[BaseModel] = GUIDES.get(name).Options
    return options


def guide_takes(name: str, what: str) -> bool:
    """Whether the guide `name` takes the run's object `what` (``tree``, ``pointer``)."""
    return what in getattr(GUIDES.get(name), "runtime", ())


def check_guide_options(name: str, options: dict[str, Any]) -> BaseModel:
    """`options` validated by the guide's settings model; a `ValueError` of one line naming
    the key, what is wrong and the keys there are."""
    model = guide_options_model(name)
    try:
        return model(**options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "options"
        raise ValueError(f"guide.options.{where} for {name}: {first['msg']} "
                         f"(its options: {', '.join(model.model_fields)})") from None


def make_guide(name: str, model: ChatModel, **options: Any) -> StepGuide:
    """The guide called `name` ("gprm", "prm", or ``package.module:Class``) over `model`,
    with its options (checked against its ``Options``) and the run's objects it takes."""
    cls = GUIDES.get(name)
    runtime = {k: options.pop(k) for k in list(options) if k in getattr(cls, "runtime", ())}
    parsed = check_guide_options(name, options)
    guide: StepGuide = cls(model, **parsed.model_dump(exclude_unset=True), **runtime)
    return guide
