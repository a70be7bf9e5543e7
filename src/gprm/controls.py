"""Non-text controls found by their outlines (edges → contours → boxes), and the merge of
those boxes with OCR phrases into one element list.

A box that tightly holds one phrase is a labelled control (a button); a box with no text
is an unlabelled icon; text outside any control stays plain text. This stands in for
OmniParser's detector without model weights: it finds what has a visible outline or
contrasting fill, which on desktop toolkits is most buttons, fields, tabs and icons.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

from core.ocr import OcrEngine, Word
from gprm.elements import UIElement

__all__ = ["ControlOptions", "LabelCache", "detect_controls", "drop_glyphs", "merge_elements", "read_labels"]

Box = tuple[int, int, int, int]

#: The dilated outline of a word reaches this many pixels past its OCR box.
GLYPH_PAD = 4


@dataclass(frozen=True, slots=True)
class ControlOptions:
    """Size limits of a control, in pixels and fractions of the screen."""

    min_side: int = 10
    min_area: int = 160
    max_width_frac: float = 0.5
    max_height_frac: float = 0.25
    max_aspect: float = 15.0
    #: Boxes overlapping a kept one by more than this IoU are duplicates.
    dedupe_iou: float = 0.6
    max_controls: int = 200
    #: A control may be this many times the area of the phrase it labels.
    label_area_ratio: float = 8.0


def _area(b: Box) -> int:
    return max(0, b[2] - b[0]) * max(0, b[3] - b[1])


def _intersection(a: Box, b: Box) -> int:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _iou(a: Box, b: Box) -> float:
    inter = _intersection(a, b)
    union = _area(a) + _area(b) - inter
    return inter / union if union else 0.0


def _is_glyphs(box: Box, text: Box) -> bool:
    """Letters of a phrase, not a control around it: the box overlaps the phrase a lot
    without holding it whole."""
    inter = _intersection(box, text)
    if inter < 0.3 * _area(box):
        return False
    holds_text = inter >= 0.8 * _area(text)
    pad = GLYPH_PAD
    hugs_text = (box[0] >= text[0] - pad and box[1] >= text[1] - pad
                 and box[2] <= text[2] + pad and box[3] <= text[3] + pad)
    return not holds_text or hugs_text


def detect_controls(img: Image.Image, text_boxes: list[Box], options: ControlOptions | None = None) -> list[Box]:
    """Boxes of outlined or filled regions that are not glyphs of the given text."""
    opts = options or ControlOptions()
    gray = cv2.cvtColor(np.asarray(img.convert("RGB")), cv2.COLOR_RGB2GRAY)
    edges = cv2.Canny(gray, 40, 120)
    edges = cv2.dilate(edges, np.ones((3, 3), np.uint8), iterations=1)
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    height, width = gray.shape
    candidates: list[Box] = []
    for contour in contours:
        x, y, w, h = cv2.boundingRect(contour)
        if w < opts.min_side or h < opts.min_side or w * h < opts.min_area:
            continue
        if w > opts.max_width_frac * width or h > opts.max_height_frac * height:
            continue
        if max(w, h) / min(w, h) > opts.max_aspect:
            continue
        box = (x, y, x + w, y + h)
        if any(_is_glyphs(box, t) for t in text_boxes):
            continue
        candidates.append(box)
    candidates.sort(key=_area)
    kept: list[Box] = []
    for box in candidates:
        if all(_iou(box, k) <= opts.dedupe_iou for k in kept):
            kept.append(box)
        if len(kept) >= opts.max_controls:
            break
    return sorted(kept, key=lambda b: (b[1], b[0]))


#: Cached label reads: a crop's digest -> its words relative to the crop's corner.
LabelCache = dict[bytes, list[Word]]


def _digest(crop: Image.Image) -> bytes:
    return hashlib.blake2b(crop.tobytes(), digest_size=16, person=f"{crop.width}x{crop.height}".encode()[:16]).digest()


def read_labels(engine: OcrEngine, img: Image.Image, controls: list[Box], phrases: list[Word], *,
                scale: int = 2, gap: int = 16, max_height: int = 80, max_width: int = 600,
                cache: LabelCache | None = None, cache_size: int = 2048) -> list[Word]:
    """Words inside controls the full-screen pass left unread, from one extra OCR call.

    Whole-screen OCR skips short labels on filled buttons; the unread controls are cropped
    (inside their outline), enlarged, stacked on a white sheet and read at once, and each
    word is mapped back to the control whose band it fell in. With a `cache`, a control
    whose pixels were read before is not read again.
    """
    unread = [b for b in controls
              if b[3] - b[1] <= max_height and b[2] - b[0] <= max_width
              and not any(_intersection(w.box, b) >= 0.5 * _area(w.box) for w in phrases)]
    # Outermost only: the letters of a label are outlined too, and are read with their button.
    unread = [b for b in unread if not any(o != b and _intersection(b, o) >= 0.9 * _area(b) for o in unread)]
    out: list[Word] = []
    crops, bands, keys, y = [], [], [], gap
    for box in unread:
        inner = (box[0] + 2, box[1] + 2, max(box[0] + 3, box[2] - 2), max(box[1] + 3, box[3] - 2))
        crop = img.crop(inner).convert("RGB")
        key = _digest(crop)
        if cache is not None and key in cache:
            out += [Word(w.text, (w.box[0] + inner[0], w.box[1] + inner[1], w.box[2] + inner[0], w.box[3] + inner[1]),
                         w.line, w.score) for w in cache[key]]
            continue
        crop = crop.resize((crop.width * scale, crop.height * scale), Image.Resampling.BICUBIC)
        crops.append((crop, y))
        bands.append((y, y + crop.height, inner))
        keys.append(key)
        y += crop.height + gap
    if not crops:
        return out
    sheet = Image.new("RGB", (max(c.width for c, _ in crops) + 2 * gap, y), (255, 255, 255))
    for crop, top in crops:
        sheet.paste(crop, (gap, top))
    found: dict[int, list[Word]] = {i: [] for i in range(len(bands))}
    for word in engine.words(sheet):
        cy = (word.box[1] + word.box[3]) / 2
        for i, (top, bottom, inner) in enumerate(bands):
            if top <= cy < bottom:
                left = inner[0] + (word.box[0] - gap) / scale
                right = inner[0] + (word.box[2] - gap) / scale
                upper = inner[1] + (word.box[1] - top) / scale
                lower = inner[1] + (word.box[3] - top) / scale
                box = (max(inner[0], round(left)), max(inner[1], round(upper)),
                       min(inner[2], round(right)), min(inner[3], round(lower)))
                if box[2] > box[0] and box[3] > box[1]:
                    found[i].append(Word(word.text, box, 1_000_000 + i, word.score))
                break
    for i, (_, _, inner) in enumerate(bands):
        out += found[i]
        if cache is not None:
            if len(cache) >= cache_size:
                cache.pop(next(iter(cache)))
            cache[keys[i]] = [Word(w.text, (w.box[0] - inner[0], w.box[1] - inner[1], w.box[2] - inner[0],
                                            w.box[3] - inner[1]), w.line, w.score) for w in found[i]]
    return out


def drop_glyphs(controls: list[Box], phrases: list[Word]) -> list[Box]:
    """Controls that are not the letters of a phrase read later."""
    return [b for b in controls if not any(_is_glyphs(b, w.box) for w in phrases)]


def merge_elements(phrases: list[Word], controls: list[Box], options: ControlOptions | None = None,
                   *, source: str = "ocr") -> list[UIElement]:
    """Elements in reading order: labelled controls, unlabelled icons and plain text."""
    opts = options or ControlOptions()
    labelled: dict[int, list[Word]] = {}
    free: list[Word] = []
    for word in phrases:
        owner = None
        for i, box in enumerate(controls):
            inside = _intersection(word.box, box) >= 0.8 * _area(word.box)
            if inside and _area(box) <= opts.label_area_ratio * max(_area(word.box), 1):
                if owner is None or _area(box) < _area(controls[owner]):
                    owner = i
        if owner is None:
            free.append(word)
        else:
            labelled.setdefault(owner, []).append(word)
    raw: list[tuple[str, Box, str, bool, str]] = []
    for i, box in enumerate(controls):
        words = labelled.get(i, [])
        text = " ".join(w.text for w in sorted(words, key=lambda w: (w.box[1], w.box[0])))
        raw.append(("icon", box, text, True, f"contour+{source}" if words else "contour"))
    raw += [("text", w.box, w.text, False, source) for w in free]
    raw.sort(key=lambda r: (r[1][1], r[1][0]))
    return [
        UIElement(id=i, type=kind, box=box, content=content, interactivity=interactive, source=src)  # type: ignore[arg-type]
        for i, (kind, box, content, interactive, src) in enumerate(raw)
    ]
