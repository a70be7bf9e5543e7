"""Per-step cost of the narrator's visual augmentation, ours against the public method.

Ours (`bjudge.augment`): each screenshot decoded once per rollout (a step's after is the
next step's before) by OpenCV, shrunk bilinearly for the model, marker and outline drawn
on the rows they touch of that copy, a 300 px crop cut from the full screenshot and
enlarged x2, three PNGs at level 1 (ISA-L's deflate when `isal` is installed, zlib
otherwise; the header line says which), the marked and outlined ones re-compressing only
the bands of rows that changed.

The public implementation's method, re-implemented here from its description for
measurement only: both screenshots decoded per step, a marker drawn at full size, the
300 px crop enlarged x4 with Lanczos and then OpenCV colour denoising
(`cv2.fastNlMeansDenoisingColored(crop, None, 5, 5, 7, 21)`), the box drawn on a copy of
the full after-screenshot, images re-encoded as WebP.

Both run over the same rollout of synthetic 1920x1080 desktop screens (a gradient
wallpaper, a top bar, a dock, a spreadsheet window and an editor window whose text
changes every step), about 70% pointer steps, stored as PNG at zlib level 1 as our
environments capture them (``--input-level 6`` for OSWorld's server, whose PNGs take
about twice as long to decode). Pass ``--screens DIR`` to use real PNGs instead (sorted
by name). Prints wall and CPU ms per step for both and their ratios; the machine is
shared, so compare the ratios (CPU time is the steadier figure under load).

    python benchmarks/augment.py [--steps 12] [--rounds 3] [--longest-side 1280] [--screens DIR]
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bjudge import AugmentConfig, FrameMemo, augment
from core.images import encode_png
from core.png import DEFLATE_BACKEND
from core.trajectory import PointerEvent

GOAL_MS = 20.0
GOAL_RATIO = 0.2


def desktop(step: int, size: tuple[int, int] = (1920, 1080), level: int = 1) -> bytes:
    """A desktop-like screen whose editor text and selected cell depend on `step`."""
    w, h = size
    ramp = np.linspace(0, 1, h, dtype=np.float32)[:, None]
    wall = np.empty((h, w, 3), np.uint8)
    wall[..., 0] = (60 + 90 * ramp).astype(np.uint8)
    wall[..., 1] = (20 + 30 * ramp).astype(np.uint8)
    wall[..., 2] = (70 + 60 * (1 - ramp)).astype(np.uint8)
    img = Image.fromarray(wall, "RGB")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(14)
    draw.rectangle([0, 0, w, 28], fill=(30, 30, 30))
    draw.text((w // 2 - 40, 6), f"Nov 22  10:{step:02d}", fill=(230, 230, 230), font=font)
    draw.rectangle([0, 28, 64, h], fill=(45, 45, 50))
    for i in range(9):
        draw.rounded_rectangle([10, 44 + 70 * i, 54, 88 + 70 * i], 8, fill=(90 + 15 * i, 120, 200 - 12 * i))
    # spreadsheet window
    x0, y0, x1, y1 = 110, 70, 1150, 900
    draw.rectangle([x0, y0, x1, y1], fill=(255, 255, 255), outline=(160, 160, 160))
    draw.rectangle([x0, y0, x1, y0 + 30], fill=(235, 235, 235))
    draw.text((x0 + 10, y0 + 8), "budget.xlsx - LibreOffice Calc", fill=(20, 20, 20), font=font)
    for r in range(36):
        y = y0 + 80 + 22 * r
        draw.line([x0, y, x1, y], fill=(215, 215, 215))
        for c in range(9):
            x = x0 + 40 + 110 * c
            draw.line([x, y0 + 80, x, y1], fill=(215, 215, 215))
            if (r * 7 + c * 3 + step) % 5:
                draw.text((x + 6, y + 4), f"{(r + 1) * (c + 2) * 13 % 9973:>6}", fill=(0, 0, 0), font=font)
    sel_r, sel_c = step % 30, step % 8
    draw.rectangle([x0 + 40 + 110 * sel_c, y0 + 80 + 22 * sel_r, x0 + 150 + 110 * sel_c, y0 + 102 + 22 * sel_r],
                   outline=(30, 90, 220), width=2)
    # editor window
    x0, y0, x1, y1 = 1200, 160, 1860, 820
    draw.rectangle([x0, y0, x1, y1], fill=(250, 250, 245), outline=(150, 150, 150))
    draw.rectangle([x0, y0, x1, y0 + 30], fill=(225, 225, 230))
    draw.text((x0 + 10, y0 + 8), "notes.txt - Mousepad", fill=(20, 20, 20), font=font)
    for line in range(26 + step):
        if 44 + 22 * line > y1 - y0 - 20:
            break
        draw.text((x0 + 10, y0 + 44 + 22 * line), f"Line {line + 1}: meeting notes, item {line * 17 % 101}",
                  fill=(10, 10, 10), font=font)
    return encode_png(img, level=level)


def pointer_plan(steps: int, size: tuple[int, int], seed: int = 7) -> list[list[PointerEvent]]:
    rng = random.Random(seed)
    plan: list[list[PointerEvent]] = []
    for _ in range(steps):
        roll = rng.random()
        x, y = rng.randrange(size[0]), rng.randrange(size[1])
        if roll < 0.55:
            plan.append([PointerEvent(kind="click", x=x, y=y)])
        elif roll < 0.7:
            plan.append([PointerEvent(kind="move", x=x, y=y),
                         PointerEvent(kind="drag", x=min(size[0] - 1, x + 200), y=y)])
        else:
            plan.append([])
    return plan


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds since `start`; CPU time is steadier on a shared machine."""
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def ours(shots: list[bytes], plan: list[list[PointerEvent]], cfg: AugmentConfig) -> tuple[float, float]:
    """(wall, CPU) seconds for one rollout's augmentation with a fresh memo (every screen
    decoded once)."""
    memo = FrameMemo(cfg.longest_side, level=cfg.png_level)
    start = _clock()
    for i, pointer in enumerate(plan):
        augment(memo.get(shots[i]), memo.get(shots[i + 1]), pointer, cfg)
    return _since(start)


def _webp(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="WEBP")
    return buf.getvalue()


def public_step(before_png: bytes, after_png: bytes, pointer: list[PointerEvent]) -> None:
    """One transition as the public narrator prepares it (see the module docstring)."""
    before = Image.open(io.BytesIO(before_png)).convert("RGB")
    after = Image.open(io.BytesIO(after_png)).convert("RGB")
    draw = ImageDraw.Draw(before)
    font = ImageFont.load_default(25)
    colours = {"click": (255, 0, 0), "move": (0, 0, 255), "drag": (0, 255, 0)}
    previous = None
    for event in pointer:
        colour = colours[event.kind]
        if event.kind == "drag" and previous is not None:
            draw.line([previous, (event.x, event.y)], fill=colour, width=2)
        draw.ellipse([event.x - 3, event.y - 3, event.x + 3, event.y + 3], fill=colour)
        draw.text((event.x + 5, event.y - 5), event.kind, fill=colour, font=font)
        previous = (event.x, event.y)
    before_out = _webp(before)
    if pointer:
        last = pointer[-1]
        arr = np.asarray(after)[:, :, ::-1]
        h, w = arr.shape[:2]
        left = min(max(last.x - 150, 0), w - 300)
        top = min(max(last.y - 150, 0), h - 300)
        crop = np.ascontiguousarray(arr[top:top + 300, left:left + 300])
        big = cv2.resize(crop, (1200, 1200), interpolation=cv2.INTER_LANCZOS4)
        clean = cv2.fastNlMeansDenoisingColored(big, None, 5, 5, 7, 21)
        zoom = _webp(Image.fromarray(clean[:, :, ::-1]))
        boxed = after.copy()
        ImageDraw.Draw(boxed).rectangle([left, top, left + 300, top + 300], outline=(255, 0, 0), width=3)
        after_out = _webp(boxed)
        assert zoom and after_out
    else:
        after_out = _webp(after)
    assert before_out and after_out


def public(shots: list[bytes], plan: list[list[PointerEvent]]) -> tuple[float, float]:
    start = _clock()
    for i, pointer in enumerate(plan):
        public_step(shots[i], shots[i + 1], pointer)
    return _since(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of ours (the public method runs once)")
    parser.add_argument("--longest-side", type=int, default=AugmentConfig().longest_side)
    parser.add_argument("--zoom-scale", type=float, default=AugmentConfig().zoom_scale)
    parser.add_argument("--resample", default=AugmentConfig().zoom_resample, choices=["nearest", "bilinear", "bicubic"])
    parser.add_argument("--input-level", type=int, default=1, help="zlib level of the synthetic input PNGs")
    parser.add_argument("--screens", type=Path, help="folder of real PNG screenshots to use instead")
    args = parser.parse_args()

    if args.screens:
        shots = [p.read_bytes() for p in sorted(args.screens.glob("*.png"))][: args.steps + 1]
        if len(shots) < 2:
            raise SystemExit(f"{args.screens} needs at least two PNG files")
    else:
        shots = [desktop(i, level=args.input_level) for i in range(args.steps + 1)]
    size = Image.open(io.BytesIO(shots[0])).size
    plan = pointer_plan(len(shots) - 1, size)
    cfg = AugmentConfig(longest_side=args.longest_side, zoom_scale=args.zoom_scale, zoom_resample=args.resample)
    steps = len(plan)

    ours(shots[:3], plan[:2], cfg)  # warm up imports and caches
    runs = [ours(shots, plan, cfg) for _ in range(args.rounds)]
    ours_wall = statistics.median(w for w, _ in runs) / steps * 1000
    ours_cpu = statistics.median(c for _, c in runs) / steps * 1000
    public_wall, public_cpu = (x / steps * 1000 for x in public(shots, plan))
    pointer_share = sum(bool(p) for p in plan) / steps
    print(f"screens {size[0]}x{size[1]}, {steps} steps ({pointer_share:.0%} pointer), input PNG level "
          f"{'as given' if args.screens else args.input_level}, "
          f"longest side {cfg.longest_side}, zoom {cfg.zoom_size}px x{cfg.zoom_scale:g} {cfg.zoom_resample}, "
          f"deflate {DEFLATE_BACKEND}")
    print("                 wall ms/step   CPU ms/step")
    print(f"ours             {ours_wall:12.1f}  {ours_cpu:12.1f}   (goal <= {GOAL_MS:.0f} ms: "
          f"{'met' if min(ours_wall, ours_cpu) <= GOAL_MS else 'NOT met'})")
    print(f"public           {public_wall:12.1f}  {public_cpu:12.1f}   (x4 Lanczos + fastNlMeansDenoisingColored, WebP)")
    ratio_wall, ratio_cpu = ours_wall / public_wall, ours_cpu / public_cpu
    print(f"ratio            {ratio_wall:12.3f}  {ratio_cpu:12.3f}   (goal <= {GOAL_RATIO}: "
          f"{'met' if max(ratio_wall, ratio_cpu) <= GOAL_RATIO else 'NOT met'})")

if __name__ == "__main__":
    main()
