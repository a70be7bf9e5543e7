"""GUI-PRA step guide: scores K candidate actions with dynamic memory and UI perception
tools and picks the best; also the standard-PRM baseline. A function of data and a chat
model: candidates and history arrive as plain data, the choice leaves with its record.

One step, as a runner wires it (one guide per rollout; it carries memory between steps)::

    guide = make_guide("gprm", model, tree=fetch_xml,    # or "prm"; the element tree's async fetch;
                       action_space=reference)           # options: parser=, pointer=, memory=, tools=, point=
    batch = await propose_candidates(lambda cfg: propose_one(cfg), k=8)   # seeds 30, 42, 3407, ...
    decision = await guide.choose(goal, screenshot_png, [HistoryStep.from_step(s) for s in steps],
                                  [Candidate(thought=..., action=..., record=..., pointer=(x, y), seed=...)])
    step.guide = decision.step_record()                  # scores, tools, evidence; images in decision.images
                                                         # `error` set when calls failed for good
"""

from core.ocr import RapidOcrEngine, TesseractEngine, make_ocr
from gprm.candidates import PAPER_SEEDS, PAPER_TOP_K, CandidateBatch, candidate_configs, propose_candidates
from gprm.elements import ParsedScreen, UIElement, draw_marks, draw_star
from gprm.guide import (
    GUIDES,
    GuiPra,
    Pick,
    StandardPrm,
    StepGuide,
    check_guide_options,
    guide_error,
    guide_options_model,
    guide_takes,
    make_guide,
    pick,
)
from gprm.history import Candidate, HistoryStep, action_text
from gprm.memory import CondensedHistory, DynamicMemory, RetrievalReply, validate_retrieval
from gprm.options import GuiPraOptions, PrmOptions
from gprm.pointing import PointAnswer, parse_point, read_point, text_match
from gprm.records import CandidateScore, GuideDecision, GuideRecord, MemoryRecord, RoutingRecord, ToolUse
from gprm.replies import ReplyError, ScoreReply, parse_list, parse_score, parse_summary
from gprm.routing import Router, RoutingReply, RoutingReplyError, RoutingRequest, RoutingResult, parse_routing
from gprm.scoring import ScoreContext, Scorer
from gprm.tools import Perception
from gprm.uiparser import LocalUIParser, OmniParserClient, ParserError, UIParser, make_parser

__all__ = [
    "GUIDES",
    "PAPER_SEEDS",
    "PAPER_TOP_K",
    "Candidate",
    "CandidateBatch",
    "CandidateScore",
    "CondensedHistory",
    "DynamicMemory",
    "GuiPra",
    "GuiPraOptions",
    "GuideDecision",
    "GuideRecord",
    "HistoryStep",
    "LocalUIParser",
    "MemoryRecord",
    "OmniParserClient",
    "ParsedScreen",
    "ParserError",
    "Perception",
    "Pick",
    "PointAnswer",
    "PrmOptions",
    "RapidOcrEngine",
    "ReplyError",
    "RetrievalReply",
    "Router",
    "RoutingRecord",
    "RoutingReply",
    "RoutingReplyError",
    "RoutingRequest",
    "RoutingResult",
    "ScoreContext",
    "ScoreReply",
    "Scorer",
    "StandardPrm",
    "StepGuide",
    "TesseractEngine",
    "ToolUse",
    "UIElement",
    "UIParser",
    "action_text",
    "candidate_configs",
    "check_guide_options",
    "draw_marks",
    "draw_star",
    "guide_error",
    "guide_options_model",
    "guide_takes",
    "make_guide",
    "make_ocr",
    "make_parser",
    "parse_list",
    "parse_point",
    "parse_routing",
    "parse_score",
    "parse_summary",
    "pick",
    "propose_candidates",
    "read_point",
    "text_match",
    "validate_retrieval",
]
