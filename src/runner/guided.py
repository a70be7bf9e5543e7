"""The guided policy step: K candidates from the worker, a step guide picks one.

At each step the worker proposes K candidates concurrently, one seed each (GUI-PRA's seeds
and sampling by default); the guide (`gprm.make_guide`: ``gprm``, ``prm`` or one of yours, module
``prm`` in the ledger) scores them and picks one, which the rollout executes and records
in the worker's history like any other step. The step line keeps the guide's record
(`gprm.GuideRecord` as JSON: every candidate with its score, memory, tools, evidence)
plus ``images``, the file names of the guide's drawn pictures (Set-of-Mark overlay, point
star) written beside the step. ``call_ids`` of a guided step list the worker's calls of all
K candidates by their ``call_id`` tag and the guide's calls by their ledger record id.

One `GuidedStep` (and one guide) serves one rollout, so the guide's memory starts empty
with every rollout, inside wide scaling and retries alike.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from agent_s3 import Proposal, Worker, action_adapter, action_call, action_reference
from core.llm import ChatModel, GenerateConfig, MissingAPIKeyError, ModelError, is_scripted
from core.protocols import Checkpoint, EnvError, Environment
from core.trajectory import Step
from gprm import (
    GUIDES,
    PAPER_SEEDS,
    PAPER_TOP_K,
    Candidate,
    HistoryStep,
    StepGuide,
    check_guide_options,
    guide_takes,
    make_guide,
)
from gprm.uiparser import TreeSource

from .config import GuideConfig, RunConfig
from .models import ModelSet, chat_model

__all__ = [
    "ActionChoice",
    "ActionChooser",
    "GuidedStep",
    "PolicyStep",
    "candidate_of",
    "check_guide",
    "guide_models",
    "guided_config",
    "history_of",
    "make_chooser",
    "tree_source",
]

#: Ledger modules of the calls made while choosing an action (the worker's and the guide's).
CHOOSING_MODULES = ("policy", "grounding", "reflection", "prm")


@dataclass(slots=True)
class ActionChoice:
    """The action a step executes, and what choosing it left for the step's record."""

    proposal: Proposal
    #: Every call made to choose it (all candidates and the guide).
    call_ids: list[str]
    #: The guide's record for `Step.guide` (None without a guide).
    guide: dict[str, Any] | None = None
    #: The guide's drawn pictures (PNG) by label, to be stored beside the step.
    images: dict[str, bytes] = field(default_factory=dict)


class ActionChooser(Protocol):
    """Chooses the action of one step, given the steps stored so far."""

    async def choose(self, instruction: str, screenshot: bytes, screen: tuple[int, int],
                     history: Sequence[Step]) -> ActionChoice: ...


class PolicyStep:
    """No guide: the worker's one proposal (K=1)."""

    def __init__(self, worker: Worker, seed: int | None = None) -> None:
        self.worker, self.seed = worker, seed

    async def choose(self, instruction: str, screenshot: bytes, screen: tuple[int, int],
                     history: Sequence[Step]) -> ActionChoice:
        proposal = await self.worker.step(instruction, screenshot, screen, seed=self.seed)
        return ActionChoice(proposal, proposal.call_ids)


def _png_size(png: bytes) -> tuple[int, int] | None:
    if len(png) < 24 or not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def candidate_of(p: Proposal, screen: tuple[int, int], shot: tuple[int, int] | None = None) -> Candidate:
    """The guide's view of a proposal: its action as the worker's call (`history_of` writes
    past steps the same way, so a repeat reads as one), its first pointer event mapped from
    screen pixels to screenshot pixels (they differ when the screenshot was scaled)."""
    pointer = None
    if p.pointer_events:
        x, y = p.pointer_events[0].x, p.pointer_events[0].y
        if shot is not None and shot != screen and screen[0] > 0 and screen[1] > 0:
            x, y = round(x * shot[0] / screen[0]), round(y * shot[1] / screen[1])
        pointer = (x, y)
    return Candidate(thought=p.thought, action=action_call(p.action), record=p.action_record(),
                     pointer=pointer, seed=p.seed)


def history_of(steps: Sequence[Step], platform: str) -> list[HistoryStep]:
    """The stored steps as the guide reads them, each action in the worker's call form (the
    candidates' form); a record that no longer validates keeps the guide's generic form."""
    out = []
    for step in steps:
        text = None
        if step.action:
            try:
                text = action_call(action_adapter.validate_python(step.action, context={"platform": platform}))
            except ValidationError:
                text = None
        out.append(HistoryStep.from_step(step, action=text))
    return out


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class GuidedStep:
    """K candidates from `worker` with `seeds`, one pick by `guide`. `model` is the guide's
    model, tagged like the worker's: the ledger records of the choosing modules made during
    `choose` with its tags are the step's, including those of candidates left out."""

    def __init__(self, worker: Worker, guide: StepGuide, seeds: Sequence[int], *, model: ChatModel | None = None) -> None:
        if not seeds:
            raise ValueError("a guided step needs at least one seed")
        self.worker, self.guide, self.seeds, self.model = worker, guide, list(seeds), model
        #: The checkpoint this rollout branched from (`--strategy branch`), for a guide that
        #: looks ahead from it and comes back; None on a rollout that did not branch.
        self.branch_point: Checkpoint | None = None
        guide.reset()

    def _calls_since(self, start: int) -> list[str]:
        ledger = self.model.ledger if self.model is not None else None
        if self.model is None or ledger is None:
            return []
        tags = {k: v for k, v in self.model.tags.items() if k != "call_id"}
        return [r.tags.get("call_id", r.id) for r in ledger.records[start:]
                if r.module in CHOOSING_MODULES and all(r.tags.get(k) == v for k, v in tags.items())]

    async def choose(self, instruction: str, screenshot: bytes, screen: tuple[int, int],
                     history: Sequence[Step]) -> ActionChoice:
        ledger = self.model.ledger if self.model is not None else None
        start = len(ledger) if ledger is not None else 0
        seeds: list[int | None] = list(self.seeds)
        proposals = await self.worker.propose(instruction, screenshot, screen, seeds=seeds)
        shot = _png_size(screenshot)
        candidates = [candidate_of(p, screen, shot) for p in proposals]
        decision = await self.guide.choose(instruction, screenshot,
                                           history_of(history, self.worker.config.platform), candidates)
        calls = _unique([i for p in proposals for i in p.call_ids] + self._calls_since(start))
        images = {label: png for label, png in decision.images.items() if png}
        return ActionChoice(proposals[decision.index], calls, decision.step_record(), images)


def _seeds(section: GuideConfig) -> list[int]:
    seeds = list(dict.fromkeys(section.seeds if section.seeds is not None else PAPER_SEEDS))
    if len(seeds) < section.candidates:
        raise ValueError(f"guide.candidates={section.candidates} needs as many distinct seeds; "
                         f"guide.seeds gives {len(seeds)}")
    return seeds[: section.candidates]


def check_guide(cfg: RunConfig) -> None:
    """Raise ValueError (one line) when the guide settings cannot run, before any desktop
    starts: too few seeds, unknown options, a scripted policy standing in as the guide, or
    the guide's model without its API key."""
    section = cfg.guide
    if section.name == "none":
        if "candidates" in section.model_fields_set:
            raise ValueError("--candidates needs a guide to choose among them: add --guide gprm or --guide prm")
        return
    if section.pointer is not None and not guide_takes(section.name, "pointer"):
        raise ValueError("guide.pointer serves GUI-PRA's point tool: it needs --guide gprm")
    _seeds(section)
    check_guide_options(section.name, section.options)
    if section.model is None and is_scripted(cfg.policy.model):
        raise ValueError("a scripted policy cannot score candidates: name the guide's model with "
                         "--guide-model provider/model")
    for role, chosen in (("model", section.model), ("pointing model", section.pointer)):
        if chosen is None:
            continue  # the policy's model is checked with the policy
        try:  # built and dropped: no connection is opened yet
            chat_model(chosen)
        except MissingAPIKeyError as e:
            raise ValueError(f"the guide's {role} {chosen.model} needs an API key: set {e.variable}") from None
        except ModelError as e:
            raise ValueError(f"the guide's {role}: {e}") from None


def guided_config(cfg: RunConfig) -> RunConfig:
    """`cfg` with the candidates' sampling (diverse: GUI-PRA's 0.5 / 0.9 / top_k 80 where the
    model takes them; the guide's temperature and top_p only when the user set them) in the
    worker's decoding settings; unchanged without a guide."""
    section = cfg.guide
    if section.name == "none":
        return cfg
    forced = {"temperature": section.temperature, "top_p": section.top_p}
    sampling = cfg.worker.generate.merged(GenerateConfig.diverse(0.5, 0.9, PAPER_TOP_K).model_copy(update=forced))
    return cfg.model_copy(update={"worker": cfg.worker.model_copy(update={"generate": sampling})})


def guide_models(run_models: ModelSet, tagged: ModelSet, tags: dict[str, Any]
                 ) -> tuple[ChatModel | None, ChatModel | None]:
    """The guide's and the pointing model of one rollout, tagged like its worker's. A
    rollout's own model set (a wide-scaling mixture entry) has none: the run's serve it."""

    def pick(own: ChatModel | None, shared: ChatModel | None) -> ChatModel | None:
        return own if own is not None else (shared.with_tags(**tags) if shared is not None else None)

    return pick(tagged.guide, run_models.guide), pick(tagged.pointer, run_models.pointer)


def tree_source(env: Environment) -> TreeSource:
    """The environment's element tree for GUI-PRA's perception (the controller's
    `/accessibility` on desktops and VMs, `uiautomator dump` on Android), fetched when the
    guide parses a screen; the environment answers None where its platform serves none."""

    async def fetch() -> str | None:
        try:
            return await env.accessibility_tree()
        except EnvError as e:
            raise RuntimeError(f"{env.name}: {e}") from e

    return fetch


def make_chooser(cfg: RunConfig, worker: Worker, guide_model: ChatModel | None, *,
                 seed: int | None = None, pointer: ChatModel | None = None,
                 tree: TreeSource | None = None) -> ActionChooser:
    """The step chooser of one rollout: `GuidedStep` with a fresh guide when the run has
    one, else the worker's single proposal. `pointer` is GUI-PRA's pointing model; `tree`
    fetches the environment's element tree for its perception (`tree_source`)."""
    section = cfg.guide
    if section.name == "none":
        return PolicyStep(worker, seed)
    if guide_model is None:
        raise ValueError(f"the {section.name} guide has no model")
    options = dict(section.options)
    if "action_space" in GUIDES.get(section.name).Options.model_fields:
        options.setdefault("action_space", action_reference(worker.allowed))
    if pointer is not None and guide_takes(section.name, "pointer"):
        options["pointer"] = pointer
    if tree is not None and guide_takes(section.name, "tree"):
        options.setdefault("tree", tree)
    guide = make_guide(section.name, guide_model, **options)
    return GuidedStep(worker, guide, _seeds(section), model=guide_model)
