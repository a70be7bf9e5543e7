"""GUI-PRA guide costs, measured side by side in one run.

1. Local UI parser seconds per 1920×1080 screenshot, for each OCR backend installed, on a
   real Xvfb desktop (mousepad full screen with a page of text; needs Xvfb, mousepad and
   xdotool) and on a Pillow-rendered busy window: a cold parse (wall and CPU seconds), and
   the parse of the next step's screen with one line changed (only changed rows are read
   again). Goal: ≤ 1 s on 2 cores.
2. K candidates proposed concurrently against a scripted model that sleeps `--latency`
   seconds per call: the step's wall time ÷ one policy call. Goal: ≤ 1.3.

    .venv/bin/python benchmarks/gprm_cost.py [--runs 5] [--latency 0.5] [--k 4]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from core.llm import ChatMessage, ChatModel, GenerateConfig, Reply, Script
from core.ocr import OcrUnavailableError, make_ocr
from gprm import LocalUIParser, propose_candidates

SIZE = (1920, 1080)
WORDS = ("invoice total amount shipping address customer order number delivery status pending "
         "approved quarterly report revenue forecast budget meeting notes project timeline").split()


def rendered_window() -> bytes:
    """A busy light window: a toolbar of buttons, a sidebar and 40 lines of text."""
    img = Image.new("RGB", SIZE, (236, 236, 240))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(18)
    for i, label in enumerate(["New", "Open", "Save", "Print", "Undo", "Redo", "Cut", "Copy", "Paste", "Find"]):
        box = (20 + i * 110, 12, 120 + i * 110, 48)
        draw.rounded_rectangle(box, radius=5, outline=(90, 90, 90), width=2, fill=(250, 250, 250))
        draw.text((box[0] + 14, box[1] + 8), label, fill=(0, 0, 0), font=font)
    draw.rectangle((0, 60, 260, SIZE[1]), fill=(222, 226, 232))
    for i in range(20):
        draw.text((20, 80 + i * 40), f"Folder {i + 1}", fill=(20, 20, 20), font=font)
    draw.rectangle((280, 60, SIZE[0] - 20, SIZE[1] - 20), fill=(255, 255, 255), outline=(160, 160, 160))
    for i in range(40):
        line = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12))
        draw.text((300, 75 + i * 24), f"{i + 1}. {line}", fill=(10, 10, 10), font=font)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def desktop_window() -> bytes | None:
    """mousepad, full screen on a 1920×1080 Xvfb, showing 40 lines of text; None if unavailable."""
    if not all(shutil.which(b) for b in ("Xvfb", "mousepad", "xdotool")):
        return None
    import mss

    folder = Path(tempfile.mkdtemp(prefix="gprm-bench-"))
    file = folder / "page.txt"
    file.write_text("\n".join(f"{i + 1}. " + " ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(10))
                              for i in range(40)) + "\n")
    read, write = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", f"{SIZE[0]}x{SIZE[1]}x24",
                             "-nolisten", "tcp"], pass_fds=(write,), stderr=subprocess.DEVNULL)
    os.close(write)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(read, 16)
        if not chunk:
            break
        number += chunk
    os.close(read)
    display = ":" + number.decode().strip()
    env = {**os.environ, "DISPLAY": display, "HOME": str(folder), "NO_AT_BRIDGE": "1"}
    env["DBUS_SESSION_BUS_ADDRESS"] = "disabled:"  # no session bus, and none autolaunched
    editor = subprocess.Popen(["mousepad", "--disable-server", str(file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        window = b""
        for _ in range(60):
            time.sleep(0.3)
            window = subprocess.run(["xdotool", "search", "--name", "page.txt"], env=env,
                                    capture_output=True, check=False).stdout.split(b"\n")[0]
            if window:
                break
        if not window:
            return None
        subprocess.run(["xdotool", "windowmove", window, "0", "0", "windowsize", window, str(SIZE[0]), str(SIZE[1])],
                       env=env, check=False)
        time.sleep(1.5)
        with mss.MSS(display=display) as sct:
            shot = sct.grab(sct.monitors[1])
            img = Image.frombytes("RGB", shot.size, shot.bgra, "raw", "BGRX")
        buf = io.BytesIO()
        img.save(buf, "PNG")
        return buf.getvalue()
    finally:
        editor.terminate()
        editor.wait(5)
        xvfb.terminate()
        xvfb.wait(5)
        shutil.rmtree(folder, ignore_errors=True)


def _cpu() -> float:
    """CPU seconds of this process and its finished children (tesseract runs as a child)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def typed_line(png: bytes, n: int) -> Image.Image:
    """The screen after a step that typed one line near the bottom (a typical small change)."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(img)
    top = SIZE[1] - 180
    draw.rectangle((300, top, 1200, top + 26), fill=(255, 255, 255))
    draw.text((304, top + 3), f"step {n}: a freshly typed line of text", fill=(0, 0, 0), font=ImageFont.load_default(18))
    return img


def time_parser(ocr: str, png: bytes, runs: int) -> tuple[float, float, float, int]:
    """Medians of (cold wall s, cold CPU s, wall s of a step that changed one line), elements."""
    walls, cpus, steps = [], [], []
    screen = LocalUIParser(ocr).parse_sync(png)  # type: ignore[arg-type]  # warm-up (model load)
    for n in range(runs):
        parser = LocalUIParser(ocr)  # type: ignore[arg-type]
        started, cpu = time.perf_counter(), _cpu()
        screen = parser.parse_sync(png)
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
        changed = typed_line(png, n)
        started = time.perf_counter()
        parser.parse_sync(changed)
        steps.append(time.perf_counter() - started)
    return statistics.median(walls), statistics.median(cpus), statistics.median(steps), len(screen.elements)


async def candidate_ratio(k: int, latency: float, runs: int) -> tuple[float, float, float]:
    Script("bench-policy", [Reply(text="click(element='OK')", delay=latency)] * (runs * (k + 1)))
    model = ChatModel.from_name("scripted/bench-policy")
    messages = [ChatMessage(role="user", content="What next?")]

    async def proposer(config: GenerateConfig) -> str:
        return (await model.generate(messages, module="policy", config=config)).text

    singles, steps = [], []
    for _ in range(runs):
        started = time.perf_counter()
        await proposer(GenerateConfig(seed=42))
        singles.append(time.perf_counter() - started)
        started = time.perf_counter()
        batch = await propose_candidates(proposer, k)
        steps.append(time.perf_counter() - started)
        assert len(batch.values) == k
    single, step = statistics.median(singles), statistics.median(steps)
    return single, step, step / single


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--runs", type=int, default=5)
    args.add_argument("--latency", type=float, default=0.5, help="scripted policy latency, seconds")
    args.add_argument("--k", type=int, default=4)
    args.add_argument("--no-desktop", action="store_true", help="skip the Xvfb screenshot")
    opts = args.parse_args()

    images = {"rendered window": rendered_window()}
    if not opts.no_desktop:
        shot = desktop_window()
        if shot is not None:
            images["mousepad on Xvfb"] = shot
    load = os.getloadavg()[0]
    print(f"UI parser, {SIZE[0]}x{SIZE[1]}, median of {opts.runs} runs after a warm-up, "
          f"{os.cpu_count()} cores, load average {load:.1f} (wall time grows with load; CPU time much less)")
    for ocr in ("tesseract", "rapidocr"):
        try:
            make_ocr(ocr)  # type: ignore[arg-type]
        except OcrUnavailableError as e:
            print(f"  {ocr:<10} unavailable: {e}")
            continue
        for name, png in images.items():
            wall, cpu, step, count = time_parser(ocr, png, opts.runs)
            verdict = "ok" if wall <= 1.0 else "over the 1 s goal"
            print(f"  {ocr:<10} {name:<18} cold: wall {wall:6.3f} s cpu {cpu:6.3f} s ({verdict}); "
                  f"next step, one line changed: wall {step:6.3f} s; {count} elements")
    single, step, ratio = asyncio.run(candidate_ratio(opts.k, opts.latency, opts.runs))
    verdict = "ok" if ratio <= 1.3 else "over the 1.3 goal"
    print(f"K={opts.k} candidates, scripted latency {opts.latency:.2f} s: one policy call {single:.3f} s, "
          f"step {step:.3f} s, ratio {ratio:.3f} ({verdict})")


if __name__ == "__main__":
    main()
