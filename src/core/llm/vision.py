"""How a model sees a screenshot and states a point: the part of its profile that grounding needs.

A provider shrinks an image larger than its model's native resolution before the model sees
it (Anthropic to a 1568-px long edge and about 1.15 megapixels; OpenAI's high detail to
2048 px, then 768 px on the short side; a Qwen-style server rounds to multiples of 28 within
its pixel budget). A model asked for pixels answers in the image it saw, so a screenshot is
sent at `VisionRules.fit` of its size, the prompt states that size, and the answer is mapped
back to the screen. How the model orders and scales a point (`points`) comes from the same
rules, never from the size of the numbers it writes.

The rules per model are the ``vision`` section of ``model_rules.yaml`` (first match on
"provider/model" wins; each entry names its source); a run's ``models:`` overrides may
replace them per model (``{"vllm/qwen3-vl": {"vision": {"points": "norm1000"}}}``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["PointConvention", "VisionRules", "vision_fields"]

#: How a model states a point: pixels of the image it saw, x then y; thousandths of the
#: width and height, x then y (Qwen3-VL, UI-TARS 1.0); thousandths, y then x (Gemini's
#: ``point`` and ``box_2d``).
PointConvention = Literal["pixels", "norm1000", "yx1000"]


class VisionRules(BaseModel):
    """The largest image a model takes without shrinking it, and how it states points."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    long_edge: int | None = None
    """Longest side, in pixels."""
    short_edge: int | None = None
    """Shortest side, in pixels."""
    pixels: int | None = None
    """Width times height."""
    multiple: int | None = None
    """Both sides a multiple of this (the server rounds to it otherwise)."""
    points: PointConvention = "pixels"
    """How it states a point: pixels, 0-1000 per axis, or y first on 0-1000 (Gemini's)."""

    def fit(self, width: int, height: int) -> tuple[int, int]:
        """The largest size of the same shape, never larger than ``(width, height)``, that the
        model sees as it is sent."""
        scale = 1.0
        if self.long_edge:
            scale = min(scale, self.long_edge / max(width, height))
        if self.short_edge:
            scale = min(scale, self.short_edge / min(width, height))
        if self.pixels:
            scale = min(scale, math.sqrt(self.pixels / (width * height)))
        w, h = max(1, math.floor(width * scale + 1e-9)), max(1, math.floor(height * scale + 1e-9))
        if self.multiple:
            w = max(self.multiple, w // self.multiple * self.multiple)
            h = max(self.multiple, h // self.multiple * self.multiple)
        return w, h


def vision_fields(rules: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], str]:
    """The vision rules of "provider/model" and their source: the first entry of `rules`
    whose `match` fits (none: no limits, pixels)."""
    for entry in rules:
        if re.search(str(entry["match"]), name):
            return {k: v for k, v in entry.items() if k not in ("match", "source")}, str(entry.get("source", ""))
    return {}, ""
