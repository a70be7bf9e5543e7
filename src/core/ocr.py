"""OCR, the project's one place for it: words with pixel boxes read off a screenshot by the
tesseract CLI or RapidOCR (ONNX models inside its wheel).

Two readers use it: the policy's text-span grounding (`agent_s3.text_spans`, tesseract over
the screenshot as it is, asynchronously, `tesseract_words`) and GUI-PRA's UI parser
(`gprm.uiparser`, an `OcrEngine`: blocking, run in a thread; tesseract reads a grey copy
cut into strips at quiet rows by concurrent processes). `phrases` joins the words of one
line into phrases, splitting where the gap is wider than a space would be, so a menu bar
becomes one element per menu while a sentence stays whole.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal, Protocol

import numpy as np
from PIL import Image

from core.png import encode_png

__all__ = [
    "OcrBackend",
    "OcrEngine",
    "OcrUnavailableError",
    "RapidOcrEngine",
    "TesseractEngine",
    "Word",
    "make_ocr",
    "normalized",
    "parse_tesseract_tsv",
    "phrases",
    "quiet_rows",
    "split_rows",
    "tesseract_words",
]

OcrBackend = Literal["rapidocr", "tesseract"]

#: A gap wider than this many median character widths starts a new phrase.
PHRASE_GAP_CHARS = 1.6


class OcrUnavailableError(RuntimeError):
    """The chosen OCR backend is not installed; the message says what to install."""


_EDGE = re.compile(r"^\W+|\W+$")


@dataclass(frozen=True, slots=True)
class Word:
    """One word and its box [left, top, right, bottom) in pixels; `line` groups a line's words."""

    text: str
    box: tuple[int, int, int, int]
    line: int = 0
    score: float = 1.0

    @property
    def left(self) -> int:
        return self.box[0]

    @property
    def top(self) -> int:
        return self.box[1]

    @property
    def width(self) -> int:
        return self.box[2] - self.box[0]

    @property
    def height(self) -> int:
        return self.box[3] - self.box[1]

    @property
    def norm(self) -> str:
        return normalized(self.text)


def normalized(token: str) -> str:
    """`token` lower-cased without leading or trailing punctuation (for matching words)."""
    return _EDGE.sub("", token.lower())


class OcrEngine(Protocol):
    name: str

    def words(self, img: Image.Image) -> list[Word]: ...


class RapidOcrEngine:
    """RapidOCR 3.x with the angle classifier off (screen text is upright) and word boxes on."""

    name = "rapidocr"

    def __init__(self, *, min_score: float = 0.5, threads: int | None = None) -> None:
        try:
            from rapidocr import RapidOCR
        except ImportError as e:
            raise OcrUnavailableError(
                "rapidocr is not installed: pip install 'rapidocr>=3,<4' onnxruntime, or use ocr='tesseract'"
            ) from e
        params: dict[str, Any] = {
            "Global.use_cls": False,
            "Global.return_word_box": True,
            "Global.text_score": min_score,
            "Global.log_level": "error",
            # Never enlarge for detection: a strip of a few rows would be blown up to 736.
            "Det.limit_type": "max",
            "Det.limit_side_len": 2000,
        }
        if threads:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
        self._engine = RapidOCR(params=params)
        self._lock = threading.Lock()

    def words(self, img: Image.Image) -> list[Word]:
        array = np.asarray(img.convert("RGB"))[:, :, ::-1]  # RapidOCR reads arrays as BGR
        with self._lock:
            result = self._engine(np.ascontiguousarray(array))
        out: list[Word] = []
        for line_no, line in enumerate(getattr(result, "word_results", None) or ()):
            for item in line:
                if not isinstance(item, tuple | list) or len(item) != 3:
                    continue  # an empty result row
                text, score, quad = item
                if not str(text).strip():
                    continue
                xs = [p[0] for p in quad]
                ys = [p[1] for p in quad]
                box = (int(min(xs)), int(min(ys)), round(max(xs)), round(max(ys)))
                out.append(Word(str(text).strip(), box, line_no, float(score)))
        return out


def parse_tesseract_tsv(tsv: str, *, min_conf: float | None = 30.0,
                        scale: tuple[float, float] = (1.0, 1.0)) -> list[Word]:
    """Word rows (level 5) of tesseract's TSV at or above `min_conf` (None: all), boxes
    multiplied by `scale` (screenshot pixels to screen pixels); a line is tesseract's
    (block, paragraph, line), numbered in reading order."""
    words: list[Word] = []
    lines: dict[tuple[int, int, int], int] = {}
    sx, sy = scale
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        try:
            left, top, width, height = (int(c) for c in cols[6:10])
            key = (int(cols[2]), int(cols[3]), int(cols[4]))
            conf = float(cols[10])
        except ValueError:
            continue
        if min_conf is not None and conf < min_conf:
            continue
        line = lines.setdefault(key, len(lines))
        x, y = round(left * sx), round(top * sy)
        box = (x, y, x + round(width * sx), y + round(height * sy))
        words.append(Word(cols[11].strip(), box, line, conf / 100))
    return words


def tesseract_argv(binary: str, *, psm: int, lang: str, options: tuple[str, ...] = ()) -> list[str]:
    """The command reading a PNG on stdin and writing TSV on stdout."""
    return [binary, "stdin", "stdout", "--psm", str(psm), "-l", lang, *options, "tsv"]


def tesseract_env() -> dict[str, str]:
    """One OpenMP thread: tesseract's threads contend badly on a busy machine (measured 4-6x
    slower with the default on 2 busy cores); a caller's own limit is kept."""
    return {**os.environ, "OMP_THREAD_LIMIT": os.environ.get("OMP_THREAD_LIMIT", "1")}


async def tesseract_words(png: bytes, *, psm: int = 6, lang: str = "eng", timeout: float = 30.0,
                          binary: str = "tesseract", scale: tuple[float, float] = (1.0, 1.0)) -> list[Word]:
    """The words tesseract reads off a PNG as it is, without blocking the event loop; boxes
    multiplied by `scale`. `OcrUnavailableError` without tesseract, `RuntimeError` (one
    line) when it fails or takes longer than `timeout` seconds."""
    if shutil.which(binary) is None:
        raise OcrUnavailableError(f"text grounding needs the {binary!r} command; install tesseract-ocr")
    proc = await asyncio.create_subprocess_exec(
        *tesseract_argv(binary, psm=psm, lang=lang), env=tesseract_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(png)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"tesseract took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"tesseract failed: {err.decode(errors='replace').strip()[:300]}")
    return parse_tesseract_tsv(out.decode("utf-8", errors="replace"), min_conf=None, scale=scale)


def quiet_rows(gray: np.ndarray, *, jump: int = 40) -> np.ndarray:
    """Per row, how many horizontal neighbours differ by more than `jump` (text rows have
    many such edges; rows between lines of text have almost none)."""
    return (np.abs(np.diff(gray.astype(np.int16), axis=1)) > jump).sum(axis=1)


def split_rows(gray: np.ndarray, parts: int, *, window: float = 0.15, max_edges: int = 6) -> list[int]:
    """Row indices at which to cut the image into about `parts` strips of equal reading work
    without cutting text: each ideal cut balances the text edges above and below it (a proxy
    for the words to read), and the quietest row within `window` of the height is taken."""
    height = gray.shape[0]
    if parts <= 1 or height < 200:
        return []
    edges = quiet_rows(gray)
    total = int(edges.sum())
    if total == 0:
        return []
    cumulative = np.cumsum(edges)
    cuts = []
    for k in range(1, parts):
        ideal = int(np.searchsorted(cumulative, total * k / parts))
        lo, hi = max(1, ideal - int(window * height)), min(height - 1, ideal + int(window * height))
        if hi <= lo:
            continue
        band = edges[lo:hi]
        quiet = np.flatnonzero(band <= min(max_edges, int(band.min())))
        if quiet.size:
            cuts.append(lo + int(quiet[np.argmin(np.abs(quiet + lo - ideal))]))
    return sorted(set(cuts))


class TesseractEngine:
    """The tesseract CLI on a grayscale image; `--psm 6` reads editor text best here.

    Tesseract is single-threaded per process here (OpenMP threads only contend), so the
    image is cut at quiet rows into `workers` strips read by concurrent processes.
    """

    name = "tesseract"

    def __init__(self, *, psm: int = 6, lang: str = "eng", min_conf: float = 30.0,
                 binary: str = "tesseract", timeout: float = 60.0, workers: int | None = None) -> None:
        path = shutil.which(binary)
        if path is None:
            raise OcrUnavailableError("tesseract is not installed: apt-get install tesseract-ocr, or use ocr='rapidocr'")
        self.binary = path
        self.psm, self.lang, self.min_conf, self.timeout = psm, lang, min_conf, timeout
        self.workers = workers if workers is not None else max(1, min(os.cpu_count() or 1, 4))

    def _read(self, gray: Image.Image) -> list[Word]:
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # a process a strip: never more threads
        proc = subprocess.run(
            tesseract_argv(self.binary, psm=self.psm, lang=self.lang, options=("-c", "tessedit_do_invert=0")),
            input=encode_png(gray), capture_output=True, timeout=self.timeout, env=env, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tesseract failed: {proc.stderr.decode(errors='replace').strip()[:300]}")
        return parse_tesseract_tsv(proc.stdout.decode("utf-8", "replace"), min_conf=self.min_conf)

    def words(self, img: Image.Image) -> list[Word]:
        gray = img.convert("L")
        cuts = split_rows(np.asarray(gray), self.workers)
        bounds = list(zip([0, *cuts], [*cuts, gray.height], strict=True))
        if len(bounds) == 1:
            return self._read(gray)
        with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
            strips = list(pool.map(lambda b: self._read(gray.crop((0, b[0], gray.width, b[1]))), bounds))
        out: list[Word] = []
        for i, ((top, _), words) in enumerate(zip(bounds, strips, strict=True)):
            out += [Word(w.text, (w.box[0], w.box[1] + top, w.box[2], w.box[3] + top), w.line + 100_000 * i, w.score)
                    for w in words]
        return out


def make_ocr(backend: OcrBackend | None = None) -> OcrEngine:
    """The named engine. By default tesseract: on a 1920×1080 screen on 2 cores it took
    ~0.2 s against RapidOCR's 1–2 s; RapidOCR reads light text on coloured bars better."""
    if backend == "tesseract":
        return TesseractEngine()
    if backend == "rapidocr":
        return RapidOcrEngine()
    if backend is not None:
        raise ValueError(f"unknown OCR backend {backend!r}; use 'rapidocr' or 'tesseract'")
    try:
        return TesseractEngine()
    except OcrUnavailableError:
        return RapidOcrEngine()


def _char_width(words: list[Word]) -> float:
    widths = [(w.box[2] - w.box[0]) / max(len(w.text), 1) for w in words]
    return max(median(widths), 1.0)


def phrases(words: list[Word], *, gap_chars: float = PHRASE_GAP_CHARS) -> list[Word]:
    """Words of each line joined left to right, split where the gap exceeds `gap_chars`
    median character widths of that line."""
    by_line: dict[int, list[Word]] = {}
    for w in words:
        by_line.setdefault(w.line, []).append(w)
    out: list[Word] = []
    for line, items in by_line.items():
        items.sort(key=lambda w: w.box[0])
        limit = gap_chars * _char_width(items)
        group = [items[0]]
        for w in items[1:]:
            if w.box[0] - group[-1].box[2] > limit:
                out.append(_join(group, line))
                group = [w]
            else:
                group.append(w)
        out.append(_join(group, line))
    out.sort(key=lambda w: (w.box[1], w.box[0]))
    return out


def _join(group: list[Word], line: int) -> Word:
    box = (min(w.box[0] for w in group), min(w.box[1] for w in group),
           max(w.box[2] for w in group), max(w.box[3] for w in group))
    return Word(" ".join(w.text for w in group), box, line, min(w.score for w in group))
