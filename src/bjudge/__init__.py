"""Behavior Judge: zoom-augmented behavior narratives per rollout and one multiple-choice
comparison that picks the best rollout; pairwise, independent-scoring and WebJudge-style
baselines, the screenshot, summary and caption representations, and offline re-judging.

While rollouts run::

    builder = NarrativeBuilder(narrator, FactCache(cache_dir), NarrativeConfig())
    await builder.add_transition(k, step, before_png, after_png)        # as each step lands
    judge = make_judge("mcq", judge_model, JudgeConfig(seed=7))
    selection = await judge(task.instruction, [await builder.candidate(k) for k in finished])

After they end: `judge_run(layout, make_representer("narrative", narrator, cache), judge)`.
"""

from .augment import AugmentedTransition, Frame, FrameMemo, augment, augment_transition, load_frame
from .builder import NarrativeBuilder
from .cache import FactCache, cache_key
from .candidates import Candidate, narrative_candidate, narrative_text
from .config import AugmentConfig, JudgeConfig, NarrativeConfig, RepresentationConfig
from .facts import FactGenerator, TransitionFacts
from .independent import IndependentJudge
from .judges import JUDGES, Judge, make_judge, sees_screens
from .mcq import MCQJudge
from .offline import JudgedTask, MissingTaskError, judge_run, judge_task
from .osworld_import import ImportReport, OSWorldImportError, import_osworld
from .pairwise import PairwiseJudge
from .parsing import AnswerReply, Choice, FactsReply, KeyPointsReply, parse_choice, read_facts, read_items
from .pointer_code import pointer_events
from .representations import REPRESENTATIONS, Representer, frame_indices, make_representer, narrate_rollout
from .webjudge import WebJudge

__all__ = [
    "JUDGES",
    "REPRESENTATIONS",
    "AnswerReply",
    "AugmentConfig",
    "AugmentedTransition",
    "Candidate",
    "Choice",
    "FactCache",
    "FactGenerator",
    "FactsReply",
    "Frame",
    "FrameMemo",
    "ImportReport",
    "IndependentJudge",
    "Judge",
    "JudgeConfig",
    "JudgedTask",
    "KeyPointsReply",
    "MCQJudge",
    "MissingTaskError",
    "NarrativeBuilder",
    "NarrativeConfig",
    "OSWorldImportError",
    "PairwiseJudge",
    "RepresentationConfig",
    "Representer",
    "TransitionFacts",
    "WebJudge",
    "augment",
    "augment_transition",
    "cache_key",
    "frame_indices",
    "import_osworld",
    "judge_run",
    "judge_task",
    "load_frame",
    "make_judge",
    "make_representer",
    "narrate_rollout",
    "narrative_candidate",
    "narrative_text",
    "parse_choice",
    "pointer_events",
    "read_facts",
    "read_items",
    "sees_screens",
]
