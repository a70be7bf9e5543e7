"""Global UI parsers: screenshot in, elements and a Set-of-Mark overlay out.

`LocalUIParser` runs on this machine with no network (OCR phrases plus outline-detected
controls). `OmniParserClient` asks an OmniParser server instead; the request and reply it
assumes are those of OmniParser's own FastAPI server:

    POST {base_url}/parse/   {"base64_image": "<PNG, base64>"}
    200 {"som_image_base64": "<PNG, base64>",
         "parsed_content_list": [{"type": "text"|"icon", "bbox": [x1, y1, x2, y2] (0–1 ratios),
                                  "interactivity": bool, "content": str, "source": str?}, ...],
         "latency": float}
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import aiohttp
import cv2
import numpy as np
from PIL import Image

from core.images import decode_png, encode_png
from core.ocr import OcrBackend, OcrEngine, OcrUnavailableError, Word, make_ocr, phrases
from gprm.a11y import TreeForm, elements_from_tree, parse_tree
from gprm.controls import (
    ControlOptions,
    LabelCache,
    detect_controls,
    drop_glyphs,
    merge_elements,
    read_labels,
)
from gprm.elements import ElementType, ParsedScreen, UIElement, draw_marks
from gprm.rereading import WordMemo

__all__ = ["LocalUIParser", "OmniParserClient", "ParserError", "TreeSource", "TreeUIParser", "UIParser", "announce_once",
           "make_parser"]


class ParserError(RuntimeError):
    """The parser could not answer; the message is evidence the guide can record."""


class UIParser(Protocol):
    @property
    def name(self) -> str: ...

    async def parse(self, screenshot: bytes) -> ParsedScreen: ...


def content_bounds(img: Image.Image, *, tolerance: int = 8) -> tuple[int, int, int, int]:
    """The smallest box holding every pixel whose grey level differs from the top-left
    corner's (a plain desktop background costs OCR time and holds nothing)."""
    gray = cv2.cvtColor(np.asarray(img.convert("RGB")), cv2.COLOR_RGB2GRAY)
    diff = cv2.absdiff(gray, np.full_like(gray, gray[0, 0]))
    _, mask = cv2.threshold(diff, tolerance, 255, cv2.THRESH_BINARY)
    points = cv2.findNonZero(mask)
    if points is None:
        return (0, 0, 0, 0)
    x, y, w, h = cv2.boundingRect(points)
    return (x, y, x + w, y + h)


class LocalUIParser:
    """OCR phrases and outline-detected controls, merged; blocking work runs in a thread."""

    def __init__(self, ocr: OcrBackend | OcrEngine | None = None, *, controls: bool = True,
                 control_options: ControlOptions | None = None, trim_background: bool = True,
                 read_control_labels: bool = True, incremental: bool = True) -> None:
        self._ocr_choice = ocr
        self._ocr: OcrEngine | None = ocr if ocr is not None and not isinstance(ocr, str) else None
        self.controls = controls
        self.control_options = control_options or ControlOptions()
        self.trim_background = trim_background
        #: Read unlabelled controls again, enlarged (one more OCR call on a small sheet).
        self.read_control_labels = read_control_labels
        #: Keep the last screen's words and re-read only the rows that changed since.
        self.memo = WordMemo() if incremental else None
        self._labels: LabelCache | None = {} if incremental else None

    @property
    def ocr(self) -> OcrEngine:
        if self._ocr is None:
            self._ocr = make_ocr(self._ocr_choice if isinstance(self._ocr_choice, str) else None)
        return self._ocr

    @property
    def name(self) -> str:
        return f"local:{self.ocr.name}"

    async def parse(self, screenshot: bytes | Image.Image) -> ParsedScreen:
        return await asyncio.to_thread(self.parse_sync, screenshot)

    def parse_sync(self, screenshot: bytes | Image.Image) -> ParsedScreen:
        """Parse now, in this thread; OCR failures surface as `ParserError`."""
        try:
            return self._parse(screenshot)
        except ParserError:
            raise
        except (OcrUnavailableError, RuntimeError, subprocess.TimeoutExpired) as e:
            raise ParserError(f"local UI parser failed: {e}") from e

    def _parse(self, screenshot: bytes | Image.Image) -> ParsedScreen:
        started = time.perf_counter()
        img = decode_png(screenshot) if isinstance(screenshot, bytes) else screenshot.convert("RGB")
        if self.memo is None:
            words = self._read_all(img)
        else:
            gray = cv2.cvtColor(np.asarray(img), cv2.COLOR_RGB2GRAY)
            words = self.memo.read(img, gray, self._read_all, self.ocr.words)
        grouped = phrases(words)
        boxes = (detect_controls(img, [w.box for w in grouped], self.control_options)
                 if self.controls else [])
        if boxes and self.read_control_labels:
            labels = phrases(read_labels(self.ocr, img, boxes, grouped, cache=self._labels))
            boxes = drop_glyphs(boxes, labels)
            grouped += labels
        elements = merge_elements(grouped, boxes, self.control_options, source=self.ocr.name)
        overlay = encode_png(draw_marks(img, elements))
        return ParsedScreen(width=img.width, height=img.height, elements=elements, overlay_png=overlay,
                            seconds=time.perf_counter() - started, backend=self.name)


    def _read_all(self, img: Image.Image) -> list[Word]:
        left, top, right, bottom = (content_bounds(img) if self.trim_background
                                    else (0, 0, img.width, img.height))
        if right <= left or bottom <= top:
            return []
        crop = img.crop((left, top, right, bottom))
        return [Word(w.text, (w.box[0] + left, w.box[1] + top, w.box[2] + left, w.box[3] + top), w.line, w.score)
                for w in self.ocr.words(crop)]


def _element(i: int, raw: Any, width: int, height: int) -> UIElement:
    if not isinstance(raw, dict):
        raise ParserError(f"element {i} is not an object")
    bbox = raw.get("bbox")
    if not (isinstance(bbox, list | tuple) and len(bbox) == 4
            and all(isinstance(v, int | float) for v in bbox)):
        raise ParserError(f"element {i} has no [x1, y1, x2, y2] bbox")
    x1, y1, x2, y2 = (float(v) for v in bbox)
    if max(x1, y1, x2, y2) <= 1.0:  # ratios, as OmniParser sends them
        x1, x2, y1, y2 = x1 * width, x2 * width, y1 * height, y2 * height
    kind: ElementType = "icon" if raw.get("type") == "icon" else "text"
    return UIElement(id=i, type=kind, box=(round(x1), round(y1), round(x2), round(y2)),
                     content=str(raw.get("content") or ""), interactivity=bool(raw.get("interactivity")),
                     source=f"omniparser:{raw.get('source') or kind}")


class OmniParserClient:
    """A client of an OmniParser server (see the module docstring for the protocol)."""

    name = "omniparser"

    def __init__(self, base_url: str, *, timeout: float = 60.0,
                 overlay: Literal["server", "local"] = "server") -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        #: Use the server's marks image, or redraw marks here from the elements.
        self.overlay = overlay

    async def parse(self, screenshot: bytes) -> ParsedScreen:
        started = time.perf_counter()
        img = decode_png(screenshot)
        body = {"base64_image": base64.b64encode(screenshot).decode("ascii")}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
                async with session.post(f"{self.base_url}/parse/", json=body) as resp:
                    if resp.status != 200:
                        text = (await resp.text())[:200]
                        raise ParserError(f"OmniParser at {self.base_url} answered HTTP {resp.status}: {text}")
                    reply = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ParserError(f"OmniParser at {self.base_url} is unreachable ({type(e).__name__}); "
                              "start it or use the local parser") from e
        if not isinstance(reply, dict) or not isinstance(reply.get("parsed_content_list"), list):
            raise ParserError("OmniParser reply has no parsed_content_list")
        elements = [_element(i, raw, img.width, img.height) for i, raw in enumerate(reply["parsed_content_list"])]
        overlay = b""
        if self.overlay == "server" and isinstance(reply.get("som_image_base64"), str):
            try:
                overlay = base64.b64decode(reply["som_image_base64"], validate=True)
                decode_png(overlay)
            except (binascii.Error, OSError, ValueError):
                overlay = b""
        if not overlay:
            overlay = encode_png(draw_marks(img, elements))
        return ParsedScreen(width=img.width, height=img.height, elements=elements, overlay_png=overlay,
                            seconds=time.perf_counter() - started, backend=self.name)


#: The runner's fetch of the environment's element tree as XML text (None: none to be had).
TreeSource = Callable[[], Awaitable[str | None]]

_log = logging.getLogger("gprm")
_ANNOUNCED: set[str] = set()


def announce_once(message: str) -> None:
    """Log `message` once per process: a run says once that a fallback perception is in use."""
    if message not in _ANNOUNCED:
        _ANNOUNCED.add(message)
        _log.warning("%s", message)


class TreeUIParser:
    """Elements from the platform's own element tree (`gprm.a11y`), fetched by `source` for
    the screenshot being judged; boxes read in `screen` pixels (the tree's), scaled to the
    screenshot's. When the tree cannot be had, `fallback` answers (the OCR parser), the
    screen's `note` says why, and the run says once that the fallback is in use; without a
    fallback that is a `ParserError`."""

    def __init__(self, source: TreeSource, *, fallback: UIParser | None = None,
                 screen: tuple[int, int] | None = None, form: TreeForm | None = None) -> None:
        self.source, self.fallback, self.screen, self.form = source, fallback, screen, form

    @property
    def name(self) -> str:
        return "a11y"

    async def parse(self, screenshot: bytes) -> ParsedScreen:
        started = time.perf_counter()
        img = decode_png(screenshot)
        problem = None
        try:
            xml = await self.source()
        except (OSError, RuntimeError, ValueError, TimeoutError) as e:
            xml, problem = None, f"fetching the element tree failed ({type(e).__name__}: {str(e)[:200]})"
        elements: list[UIElement] = []
        if problem is None and not xml:
            problem = "the environment has no element tree"
        if problem is None and xml:
            try:
                nodes = await asyncio.to_thread(parse_tree, xml, self.form)
            except ValueError as e:
                problem = str(e)
            else:
                elements = elements_from_tree(nodes, img.size, self.screen)
                if not elements:
                    problem = "the element tree lists nothing on screen"
        if problem is not None:
            if self.fallback is None:
                raise ParserError(problem)
            announce_once(f"GUI-PRA perception: {problem}; the {self.fallback.name} parser (OCR and outlines) "
                          "answers instead")
            parsed = await self.fallback.parse(screenshot)
            return parsed.model_copy(update={"note": f"{problem}; answered by {parsed.backend}"})
        overlay = await asyncio.to_thread(lambda: encode_png(draw_marks(img, elements)))
        return ParsedScreen(width=img.width, height=img.height, elements=elements, overlay_png=overlay,
                            seconds=time.perf_counter() - started, backend=self.name)


def make_parser(backend: str = "local", *, ocr: OcrBackend | None = None, url: str | None = None,
                tree: TreeSource | None = None, **options: Any) -> UIParser:
    """"tree" (the platform's element tree, needs `tree`, the OCR parser as its fallback),
    "local" (OCR and outlines, optionally `ocr="rapidocr"|"tesseract"`) or "omniparser"
    (the paper's, needs `url`)."""
    if backend == "tree":
        if tree is None:
            raise ValueError("the tree parser needs the environment's element tree: pass tree=<async fetch>")
        return TreeUIParser(tree, fallback=LocalUIParser(ocr), **options)
    if backend == "local":
        announce_once("GUI-PRA perception: the OCR and outline parser is in use (no element tree was given)")
        return LocalUIParser(ocr, **options)
    if backend == "omniparser":
        if not url:
            raise ValueError("the omniparser parser needs url=http://host:port of an OmniParser server")
        return OmniParserClient(url, **options)
    raise ValueError(f"unknown UI parser {backend!r}; use 'tree', 'local' or 'omniparser'")
