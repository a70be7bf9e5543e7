"""A candidate as a judge sees it: a rollout index and the parts (text and images) that
represent it. Judges only arrange candidates; representations decide their content."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.llm import ImagePart, Part, TextPart
from core.trajectory import Narrative

from .config import AugmentConfig
from .frames import Frame, load_frame

__all__ = ["Candidate", "narrative_candidate", "narrative_text", "shown_png"]


@dataclass(frozen=True)
class Candidate:
    """One rollout's representation. `rollout` is its index in the run; judges label
    candidates by shown position, never by this index."""

    rollout: int
    parts: list[Part] = field(default_factory=list)
    representation: str = "narrative"

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


def shown_png(png: bytes, longest_side: int | None, level: int = 1, *, frame: Frame | None = None) -> bytes:
    """`png` downscaled for a model (re-encoded only when it shrinks); pass its decoded
    `frame` when one is at hand to skip decoding."""
    frame = frame or load_frame(png, longest_side, level=level)
    return png if not frame.downscaled else frame.bands.png()


def narrative_text(narrative: Narrative, *, ending: str | None = None) -> str:
    """The facts as numbered lines, ``F<step>.<n>``, so a judge can cite them."""
    lines = ["Facts, step by step (cite them by id, e.g. F3.2 = step 3, fact 2):"]
    if not narrative.facts:
        lines.append("(the rollout took no steps)")
    for i, facts in enumerate(narrative.facts, start=1):
        if not facts:
            lines.append(f"Step {i}: (no facts could be established for this step)")
            continue
        lines.append(f"Step {i}:")
        lines.extend(f"  F{i}.{j} {fact}" for j, fact in enumerate(facts, start=1))
    if ending:
        lines.append(f"How the rollout ended: {ending}")
    return "\n".join(lines)


def narrative_candidate(
    narrative: Narrative,
    initial_png: bytes | None,
    final_png: bytes | None,
    *,
    augment: AugmentConfig | None = None,
    ending: str | None = None,
    prepared: bool = False,
) -> Candidate:
    """(s_0, facts..., s_T): the start screen, the facts, the end screen. Blocking: it
    decodes and may re-encode both screenshots, unless `prepared` says they already are
    as the model should see them."""
    cfg = augment or AugmentConfig()
    parts: list[Part] = []
    if narrative.initial_state:
        parts.append(TextPart(text=f"Initial screen: {narrative.initial_state}"))
    if initial_png is not None:
        parts += [TextPart(text="Initial screen:"),
                  ImagePart(data=initial_png if prepared else shown_png(initial_png, cfg.longest_side, cfg.png_level),
                            detail="high")]
    parts.append(TextPart(text=narrative_text(narrative, ending=ending)))
    if narrative.final_state:
        parts.append(TextPart(text=f"Final screen: {narrative.final_state}"))
    if final_png is not None:
        parts += [TextPart(text="Final screen:"),
                  ImagePart(data=final_png if prepared else shown_png(final_png, cfg.longest_side, cfg.png_level),
                            detail="high")]
    return Candidate(rollout=narrative.rollout, parts=parts, representation="narrative")
