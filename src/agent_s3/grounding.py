"""Grounding: element descriptions become screen points, text spans become drag endpoints.

A point comes from a chat model (module `grounding`): either a general model asked for a
point, or a UI-TARS-style grounding model behind any OpenAI-compatible endpoint. The
screenshot goes to it at the largest size it sees without the provider shrinking it (its
profile's vision rules: Anthropic's 1568-px long edge and ~1.15 MP, OpenAI's 2048/768 tiles,
a Qwen-style server's multiples of 28), the prompt states that size, and the answer is read
in the units and order the model's profile (or `GroundingConfig.space`) names: pixels of
the image it saw, thousandths, or Gemini's y-first thousandths. It must name one
unambiguous point (`point_reply`), else the policy is told why; the point is mapped back to
screen pixels. Text spans are found by OCR. Results are cached per screenshot, so K
candidates naming the same element cost one call.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from dataclasses import dataclass, field

from PIL import Image

from agent_s3.actions import Action, Click, DragAndDrop, HighlightTextSpan, Scroll, TypeText
from agent_s3.calls import ModelCall, call_model
from agent_s3.config import GroundingConfig
from agent_s3.facts import platform_name
from agent_s3.point_reply import PointOrder, PointReplyError, read_point
from agent_s3.points import Point, scale
from agent_s3.prompts import render
from agent_s3.text_spans import OcrError, OcrReader
from core.images import decode_png, encode_png, resize
from core.llm import ChatMessage, ChatModel, ImagePart, TextPart
from core.llm.vision import VisionRules
from core.protocols import Platform

__all__ = ["Grounder", "Grounding", "GroundingError"]

class GroundingError(ValueError):
    """An element or phrase could not be located; the message is feedback for the policy."""


@dataclass(slots=True)
class Grounding:
    """Located points of one action ("target", or "start" and "end") and the calls made."""

    points: dict[str, Point] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)


def _png_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as img:
        return img.size


@dataclass(frozen=True, slots=True)
class Seen:
    """The screenshot as the grounding model gets it, and the space its answer is read in."""

    png: bytes
    #: (width, height) of `png`: what the prompt states.
    size: tuple[int, int]
    #: (width, height) of the answer's units, x first.
    space: tuple[float, float]
    order: PointOrder
    mode: str


class Grounder:
    """Locates the elements and text spans an action refers to on one screenshot."""

    def __init__(
        self,
        model: ChatModel,
        config: GroundingConfig | None = None,
        *,
        platform: Platform = "ubuntu",
        ocr: OcrReader | None = None,
    ) -> None:
        self.model = model
        self.config = config or GroundingConfig()
        self.platform = platform
        self.ocr = ocr or OcrReader(psm=self.config.tesseract_psm)
        self._cache: dict[tuple[str, str], asyncio.Future[tuple[Point, ModelCall]]] = {}
        self._digest = ""
        self._seen: Seen | None = None

    @property
    def vision(self) -> VisionRules:
        """The grounding model's vision rules (no limits for a model without a profile)."""
        profile = getattr(self.model.api, "profile", None)
        return profile.vision if profile is not None else VisionRules()

    def seen(self, png: bytes) -> Seen:
        """`png` as the model will see it, and the space of its answer."""
        vision = self.vision
        size = _png_size(png)
        sent = vision.fit(*size)
        data = png if sent == size else encode_png(resize(decode_png(png), sent))
        mode = vision.points if self.config.space == "profile" else self.config.space
        space: tuple[float, float] = {
            "pixels": (float(sent[0]), float(sent[1])),
            "norm1000": (1000.0, 1000.0),
            "yx1000": (1000.0, 1000.0),
            "norm100": (100.0, 100.0),
            "custom": (float(self.config.width or 1), float(self.config.height or 1)),
        }[mode]
        return Seen(data, sent, space, "yx" if mode == "yx1000" else "xy", mode)

    def _messages(self, description: str, seen: Seen) -> list[ChatMessage]:
        image = ImagePart(data=seen.png, detail="high")
        if self.config.style == "uitars":
            return [
                ChatMessage(
                    role="user",
                    content=[image, TextPart(text=render("grounding_query", description=description))],
                )
            ]
        w, h = seen.space
        sw, sh = seen.size
        form, example = {
            "pixels": ("as (x, y) in pixels of this screenshot", f"({round(w * 0.31)}, {round(h * 0.47)})"),
            "norm1000": ("as (x, y) with x and y from 0 to 1000 (thousandths of the width and height)",
                         f"({round(w * 0.31)}, {round(h * 0.47)})"),
            "norm100": ("as (x, y) with x and y from 0 to 100 (percent of the width and height)",
                        f"({round(w * 0.31)}, {round(h * 0.47)})"),
            "yx1000": ('as JSON {"point": [y, x]}, y first, both from 0 to 1000 (thousandths of the height and '
                       "width)", '{"point": [470, 310]}'),
            "custom": (f"as (x, y) with x from 0 to {w:g} and y from 0 to {h:g}",
                       f"({round(w * 0.31)}, {round(h * 0.47)})"),
        }[seen.mode]
        note = f"The screenshot is {sw}x{sh} pixels; (0, 0) is its top-left corner."
        prompt = render(
            "grounding_policy",
            platform_name=platform_name(self.platform),
            description=description,
            form=form,
            example=example,
            space_note=note,
        )
        return [ChatMessage(role="user", content=[TextPart(text=prompt), image])]

    async def locate(self, description: str, png: bytes, screen: tuple[int, int]) -> tuple[Point, ModelCall]:
        """The screen point of the element `description` on screenshot `png`.

        Concurrent requests for the same element on the same screenshot share one call.
        """
        digest = hashlib.sha256(png).hexdigest()
        if digest != self._digest or self._seen is None:
            self._cache.clear()
            self._seen = await asyncio.to_thread(self.seen, png)
            self._digest = digest
        key = (description, f"{screen[0]}x{screen[1]}")
        task = self._cache.get(key)
        if task is None:
            task = asyncio.ensure_future(self._ask(description, self._seen, screen))
            self._cache[key] = task
        try:
            return await asyncio.shield(task)
        except Exception:
            if self._cache.get(key) is task:
                del self._cache[key]  # a failure is not remembered; the next request asks again
            raise

    async def _ask(self, description: str, seen: Seen, screen: tuple[int, int]) -> tuple[Point, ModelCall]:
        call = await call_model(
            self.model, self._messages(description, seen), module="grounding", config=self.config.generate
        )
        space = seen.space
        try:
            x, y = read_point(call.text, space, convention=seen.order)
        except PointReplyError as e:
            raise GroundingError(
                f"The element {description!r} could not be located ({e}); "
                "describe it differently or choose another action."
            ) from None
        return scale(x, y, space, screen, pixels=seen.mode in ("pixels", "custom")), call

    async def ground(self, action: Action, png: bytes, screen: tuple[int, int]) -> Grounding:
        """Everything `action` needs located; nothing for actions without targets."""
        out = Grounding()
        match action:
            case Click() | Scroll() | TypeText() if action.element_description:
                point, call = await self.locate(action.element_description, png, screen)
                out.points["target"], out.calls = point, [call]
            case DragAndDrop():
                (p0, c0), (p1, c1) = await asyncio.gather(
                    self.locate(action.starting_description, png, screen),
                    self.locate(action.ending_description, png, screen),
                )
                out.points.update(start=p0, end=p1)
                out.calls = [c0] if c0 is c1 else [c0, c1]
            case HighlightTextSpan():
                try:
                    p0, p1 = await self.ocr.span(png, screen, action.starting_phrase, action.ending_phrase)
                except OcrError as e:
                    raise GroundingError(str(e)) from None
                out.points.update(start=p0, end=p1)
        return out
