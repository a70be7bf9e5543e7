"""The perception tools the router may call on the current screenshot: the global UI
parser and the Point tool. Each returns evidence text for the scorer and an image.

A `Perception` is made per guided step: it caches the parse of that step's screenshot, so
pointing by text reuses the parser's elements instead of reading the screen twice.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from core.images import decode_png, downscale, encode_png, resize
from core.llm import ChatMessage, ChatModel, GenerateConfig, ImagePart, ModelCallError, TextPart
from gprm.elements import ParsedScreen, draw_star, elements_text
from gprm.pointing import Convention, PointAnswer, match_element, read_point
from gprm.prompts import render
from gprm.records import ToolUse
from gprm.replies import ReplyError
from gprm.uiparser import ParserError, UIParser

__all__ = ["PARSER_TOOL", "POINT_TOOL", "TOOL_SPECS", "Perception", "PointMode", "ToolSpec"]

PARSER_TOOL = "ui_parser"
POINT_TOOL = "point"
MODULE = "prm"

PointMode = Literal["auto", "model", "ocr"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    example: str


TOOL_SPECS = {
    PARSER_TOOL: ToolSpec(
        PARSER_TOOL,
        "reads the whole screen: every text and control with its box, whether it is interactive, "
        "and an image of the screen with each element numbered.",
        '{"name": "ui_parser", "arguments": {}}',
    ),
    POINT_TOOL: ToolSpec(
        POINT_TOOL,
        "finds one element described in words (its label or look) and marks it with a red star "
        "on the screenshot; answers where it is, or that it was not found.",
        '{"name": "point", "arguments": {"target": "the \'Save\' button"}}',
    ),
}


@dataclass
class Perception:
    """The tools for one screenshot."""

    screenshot: bytes
    parser: UIParser | None = None
    pointer: ChatModel | None = None
    point_mode: PointMode = "auto"
    #: The coordinate space the pointing prompt declares (Molmo answers in percent); "profile":
    #: the pointing model's own (its profile's vision rules: pixels, thousandths, Gemini's).
    point_coordinates: Convention | Literal["profile"] = "percent"
    #: Re-asks of the pointing model after an unreadable reply.
    max_reasks: int = 1
    #: False leaves the Point tool out (the paper's ablation without Point).
    point: bool = True
    #: Longest side of images sent to the pointing model.
    image_side: int | None = 1280
    star_radius: int | None = None
    _parsed: ParsedScreen | None = None
    _parse_error: str | None = None
    _task: asyncio.Task[None] | None = None
    images: dict[str, bytes] = field(default_factory=dict)

    def available(self) -> list[str]:
        names = []
        if self.parser is not None:
            names.append(PARSER_TOOL)
        if self.point and (self.pointer is not None or (self.parser is not None and self.point_mode != "model")):
            names.append(POINT_TOOL)
        return names

    async def run(self, name: str, arguments: dict[str, Any]) -> ToolUse:
        started = time.perf_counter()
        try:
            if name == PARSER_TOOL:
                use = await self._parse_tool()
            elif name == POINT_TOOL:
                use = await self._point_tool(str(arguments.get("target") or arguments.get("param") or "").strip())
            else:
                raise ValueError(f"unknown tool {name!r}")
        except (ParserError, ModelCallError) as e:
            problem = str(e).replace("\n", " ")[:300]
            use = ToolUse(name=name, evidence=f"the tool failed: {problem}", ok=False, error=problem)
        use.arguments = dict(arguments)
        use.seconds = time.perf_counter() - started
        return use

    def prefetch(self) -> None:
        """Start parsing now, in the background, so the parse overlaps the model calls that
        come before any tool runs; `close` must follow."""
        if self.parser is not None and self._task is None:
            self._task = asyncio.create_task(self._parse_once())

    async def close(self) -> None:
        """Wait for a prefetch still running (its thread cannot be interrupted)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _parse_once(self) -> None:
        assert self.parser is not None
        try:
            self._parsed = await self.parser.parse(self.screenshot)
        except ParserError as e:
            self._parse_error = str(e)

    async def parsed(self) -> ParsedScreen | None:
        if self.parser is None:
            return None
        if self._task is None:
            self._task = asyncio.create_task(self._parse_once())
        await asyncio.shield(self._task)
        if self._parse_error is not None:
            raise ParserError(self._parse_error)
        return self._parsed

    async def _parse_tool(self) -> ToolUse:
        screen = await self.parsed()
        assert screen is not None
        self.images["ui_parser"] = screen.overlay_png
        listing = elements_text(screen.elements)
        evidence = (f"{len(screen.elements)} elements on the {screen.width}x{screen.height} screen "
                    f"(numbered on the ui_parser image):\n{listing}")
        return ToolUse(name=PARSER_TOOL, evidence=evidence, image="ui_parser", perception=screen.backend,
                       perception_note=screen.note or None)

    async def _point_tool(self, target: str) -> ToolUse:
        if not target:
            return ToolUse(name=POINT_TOOL, evidence="no target was given to point at", ok=False)
        img = decode_png(self.screenshot)
        answer: PointAnswer | None = None
        how = ""
        by_elements = False
        if self.point_mode in ("auto", "ocr") and self.parser is not None:
            answer, how = await self._point_by_text(target)
            by_elements = answer is not None
        if answer is None and self.point_mode in ("auto", "model") and self.pointer is not None:
            answer, how = await self._point_by_model(target, img.size)
        if answer is None:
            failed = f"the UI parser failed: {self._parse_error}" if self._parse_error is not None else None
            return ToolUse(name=POINT_TOOL, evidence=f"{target!r} was not found on the screen ({how or 'no pointer'})",
                           ok=False, error=failed)
        radius = self.star_radius or max(10, round(max(img.size) / 80))
        self.images["point"] = await asyncio.to_thread(
            lambda: encode_png(draw_star(img, answer.x, answer.y, radius=radius)))
        px, py = round(answer.x), round(answer.y)
        evidence = (f"{target!r} is at pixel ({px}, {py}) = ({answer.x / img.width * 100:.1f}%, "
                    f"{answer.y / img.height * 100:.1f}%) of the screen [{how}]; a red star marks it "
                    "on the point image.")
        screen = self._parsed if by_elements else None
        return ToolUse(name=POINT_TOOL, evidence=evidence, image="point",
                       perception=screen.backend if screen is not None else None,
                       perception_note=(screen.note or None) if screen is not None else None)

    async def _point_by_text(self, target: str) -> tuple[PointAnswer | None, str]:
        try:
            screen = await self.parsed()
        except ParserError:
            return None, "the UI parser failed"
        if screen is None:
            return None, "no UI parser"
        e = match_element(target, screen.elements)
        if e is None:
            return None, f"no element of the {screen.backend} parser's {len(screen.elements)} matches"
        x, y = e.centre
        what = f"{e.role or e.type} {e.content!r}" if e.content else (e.role or e.type)
        return (PointAnswer(x=x, y=y, form="element", convention="pixels"),
                f"element {e.id}: {what} at {list(e.box)}, from the {screen.backend} parser")

    async def _point_by_model(self, target: str, size: tuple[int, int]) -> tuple[PointAnswer | None, str]:
        assert self.pointer is not None
        img = decode_png(self.screenshot)
        vision = self.pointer.api.profile.vision
        sent = downscale(img, self.image_side)
        sent = resize(sent, vision.fit(*sent.size))  # the size the pointing model sees unshrunk
        data = self.screenshot if sent is img else encode_png(sent)
        coordinates: Convention = vision.points if self.point_coordinates == "profile" else self.point_coordinates
        prompt = render("point_user", target=target, coordinates=coordinates,
                        width=sent.size[0], height=sent.size[1])
        messages = [ChatMessage(role="user", content=[TextPart(text=prompt), ImagePart(data=data)])]
        for attempt in range(self.max_reasks + 1):
            reply = await self.pointer.generate(messages, module=MODULE, config=GenerateConfig.deterministic())
            try:
                answer = read_point(reply.text, size, coordinates=coordinates, sent_size=sent.size)
            except ReplyError as e:
                if attempt < self.max_reasks:
                    messages = [*messages, ChatMessage(role="assistant", content=reply.text[:2000] or "(empty)"),
                                ChatMessage(role="user", content=f"Your reply could not be used: {e}")]
                    continue
                return None, f"the pointing model's reply was unreadable: {reply.text.strip()[:120]!r}"
            if answer is None:
                return None, f"the pointing model answered {reply.text.strip()[:120]!r}"
            return answer, f"pointing model, {answer.form} answer in {answer.convention}"
        return None, "the pointing model gave no answer"
