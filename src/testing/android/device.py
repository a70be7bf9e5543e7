"""A small simulated Android phone: a launcher, a notes app and a settings app, drawn with Pillow.

It stands in for an emulator where none can run. Its state changes the way a phone's would
on taps, long presses, swipes, typed text and key events; `snapshot_save` / `snapshot_load`
mirror the emulator's VM snapshots. Every method is thread-safe (the fake adb server and
console serve each connection on its own thread).
"""

from __future__ import annotations

import copy
import io
import threading
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

__all__ = ["LAUNCHER", "NOTES", "NOTES_FILE", "SETTINGS", "DeviceState", "SimulatedDevice"]

LAUNCHER = "com.android.launcher3"
NOTES = "com.example.notes"
SETTINGS = "com.android.settings"
NOTES_FILE = "/sdcard/Notes/notes.txt"

#: package -> (label, main activity)
APPS: dict[str, tuple[str, str]] = {
    LAUNCHER: ("Launcher", ".Launcher"),
    NOTES: ("Notes", ".MainActivity"),
    SETTINGS: ("Settings", ".Settings"),
    "com.android.chrome": ("Chrome", "com.google.android.apps.chrome.Main"),
}
#: Launcher icons: package -> box (fractions of the screen: left, top, right, bottom).
_ICONS = {
    NOTES: (0.08, 0.16, 0.30, 0.28),
    SETTINGS: (0.39, 0.16, 0.61, 0.28),
    "com.android.chrome": (0.70, 0.16, 0.92, 0.28),
}
_FIELD = (0.05, 0.14, 0.95, 0.22)
_SAVE = (0.70, 0.235, 0.95, 0.29)
_LIST_TOP, _ROW = 0.32, 0.06
#: Settings rows: (label, namespace, key) with the row's vertical band.
_TOGGLES = (("Airplane mode", "global", "airplane_mode_on"), ("Wi-Fi", "global", "wifi_on"))
_TOGGLE_TOP, _TOGGLE_ROW = 0.14, 0.09


@dataclass
class DeviceState:
    """Everything a snapshot saves."""

    foreground: str = LAUNCHER
    back_stack: list[str] = field(default_factory=list)
    draft: str = ""
    focused: bool = False
    scroll: int = 0
    settings: dict[str, dict[str, str]] = field(
        default_factory=lambda: {
            "global": {"airplane_mode_on": "0", "wifi_on": "1"},
            "system": {},
            "secure": {},
        }
    )
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def notes(self) -> list[str]:
        return [n for n in self.files.get(NOTES_FILE, b"").decode().splitlines() if n]


def _inside(box: tuple[float, float, float, float], x: float, y: float, w: int, h: int) -> bool:
    return box[0] * w <= x <= box[2] * w and box[1] * h <= y <= box[3] * h


class SimulatedDevice:
    """One phone; `serial` is what the adb server lists it as."""

    def __init__(
        self, serial: str, size: tuple[int, int] = (720, 1280), *, model: str = "sdk_gphone64_x86_64"
    ) -> None:
        self.serial = serial
        self.size = size
        self.model = model
        self.online = True
        self.state = DeviceState()
        self.snapshots: dict[str, DeviceState] = {}
        #: Every input event as (kind, args), for tests to read.
        self.events: list[tuple[str, tuple[object, ...]]] = []
        self.lock = threading.RLock()

    # -- snapshots --------------------------------------------------------------------

    def snapshot_save(self, name: str) -> None:
        with self.lock:
            self.snapshots[name] = copy.deepcopy(self.state)

    def snapshot_load(self, name: str) -> bool:
        with self.lock:
            if name not in self.snapshots:
                return False
            self.state = copy.deepcopy(self.snapshots[name])
            return True

    # -- apps -------------------------------------------------------------------------

    def start(self, package: str) -> bool:
        """Bring `package` to the front (launching it); False if it is not installed."""
        with self.lock:
            if package not in APPS:
                return False
            st = self.state
            if st.foreground != package:
                st.back_stack = [p for p in st.back_stack if p != package]
                if st.foreground != LAUNCHER:
                    st.back_stack.append(st.foreground)
                st.foreground = package
            st.focused = False
            return True

    def force_stop(self, package: str) -> None:
        with self.lock:
            st = self.state
            st.back_stack = [p for p in st.back_stack if p != package]
            if st.foreground == package:
                st.foreground = st.back_stack.pop() if st.back_stack else LAUNCHER
            if package == NOTES:
                st.draft = ""

    # -- input ------------------------------------------------------------------------

    def tap(self, x: float, y: float) -> None:
        with self.lock:
            self.events.append(("tap", (x, y)))
            w, h = self.size
            st = self.state
            if st.foreground == LAUNCHER:
                for package, box in _ICONS.items():
                    if _inside(box, x, y, w, h):
                        self.start(package)
                        return
            elif st.foreground == NOTES:
                if _inside(_FIELD, x, y, w, h):
                    st.focused = True
                elif _inside(_SAVE, x, y, w, h):
                    self._save_note()
                else:
                    st.focused = False
            elif st.foreground == SETTINGS:
                row = self._toggle_at(y)
                if row is not None:
                    _, ns, key = _TOGGLES[row]
                    current = st.settings.setdefault(ns, {}).get(key, "0")
                    st.settings[ns][key] = "0" if current == "1" else "1"

    def long_press(self, x: float, y: float, ms: int) -> None:
        with self.lock:
            self.events.append(("long_press", (x, y, ms)))
            st = self.state
            if st.foreground == NOTES:
                index = self._note_at(y)
                notes = st.notes
                if index is not None and index < len(notes):
                    del notes[index]
                    self._write_notes(notes)
                    return
            self.tap(x, y)

    def swipe(self, x1: float, y1: float, x2: float, y2: float, ms: int) -> None:
        with self.lock:
            self.events.append(("swipe", (x1, y1, x2, y2, ms)))
            if abs(x2 - x1) < 10 and abs(y2 - y1) < 10:
                (self.long_press if ms >= 500 else lambda a, b, _m: self.tap(a, b))(x1, y1, ms)
                return
            st = self.state
            if st.foreground == NOTES:
                rows = max(0, len(st.notes) - 1)
                st.scroll = min(rows, max(0, st.scroll + round((y1 - y2) / (self.size[1] * _ROW))))

    def text(self, text: str) -> None:
        with self.lock:
            self.events.append(("text", (text,)))
            st = self.state
            if st.foreground == NOTES and st.focused:
                st.draft += text

    def key(self, code: str) -> None:
        with self.lock:
            self.events.append(("key", (code,)))
            st = self.state
            if code == "KEYCODE_HOME":
                st.foreground, st.focused, st.back_stack = LAUNCHER, False, []
            elif code == "KEYCODE_BACK":
                if st.foreground == NOTES and st.focused:
                    st.focused = False
                elif st.foreground != LAUNCHER:
                    st.foreground = st.back_stack.pop() if st.back_stack else LAUNCHER
            elif st.foreground == NOTES and st.focused:
                if code == "KEYCODE_DEL":
                    st.draft = st.draft[:-1]
                elif code == "KEYCODE_ENTER":
                    self._save_note()
                elif code == "KEYCODE_SPACE":
                    st.draft += " "
                elif code.startswith("KEYCODE_") and len(code) == 9:
                    st.draft += code[-1].lower()

    # -- state helpers ----------------------------------------------------------------

    def _save_note(self) -> None:
        st = self.state
        text = st.draft.strip()
        if text:
            self._write_notes([*st.notes, text])
        st.draft, st.focused = "", False

    def _write_notes(self, notes: list[str]) -> None:
        self.state.files[NOTES_FILE] = ("".join(f"{n}\n" for n in notes)).encode()

    def _note_at(self, y: float) -> int | None:
        top = _LIST_TOP * self.size[1]
        if y < top:
            return None
        return int((y - top) // (_ROW * self.size[1])) + self.state.scroll

    def _toggle_at(self, y: float) -> int | None:
        h = self.size[1]
        for i in range(len(_TOGGLES)):
            top = (_TOGGLE_TOP + i * _TOGGLE_ROW) * h
            if top <= y < top + _TOGGLE_ROW * h:
                return i
        return None

    # -- screen -----------------------------------------------------------------------

    def screencap(self) -> bytes:
        """The screen as PNG bytes, as `screencap -p` writes them."""
        with self.lock:
            st = copy.deepcopy(self.state)
        w, h = self.size
        img = Image.new("RGB", (w, h), (250, 250, 250))
        d = ImageDraw.Draw(img)
        big = ImageFont.load_default(max(12, h // 40))
        small = ImageFont.load_default(max(10, h // 55))
        d.rectangle([0, 0, w, h * 0.035], fill=(30, 30, 30))
        d.text((w * 0.03, h * 0.005), "12:00", fill="white", font=small)
        if st.foreground == LAUNCHER:
            d.rectangle([0, h * 0.035, w, h], fill=(40, 90, 140))
            for package, box in _ICONS.items():
                x0, t, r, b = box[0] * w, box[1] * h, box[2] * w, box[3] * h
                d.rounded_rectangle(
                    [x0, t, r, t + (r - x0) * 0.8], radius=int(w * 0.03), fill=(240, 240, 240)
                )
                d.text(
                    (x0 + (r - x0) * 0.5, t + (r - x0) * 0.4),
                    APPS[package][0][0],
                    fill=(40, 90, 140),
                    font=big,
                    anchor="mm",
                )
                d.text(((x0 + r) / 2, b), APPS[package][0], fill="white", font=small, anchor="mb")
        elif st.foreground == NOTES:
            self._title(d, "Notes", big)
            x0, t, r, b = (v * s for v, s in zip(_FIELD, (w, h, w, h), strict=True))
            d.rectangle([x0, t, r, b], outline=(0, 120, 215) if st.focused else (150, 150, 150), width=3)
            shown = st.draft or ("" if st.focused else "Write a note")
            d.text(
                (x0 + 12, (t + b) / 2),
                shown + ("|" if st.focused else ""),
                fill=(20, 20, 20) if st.draft else (150, 150, 150),
                font=big,
                anchor="lm",
            )
            x0, t, r, b = (v * s for v, s in zip(_SAVE, (w, h, w, h), strict=True))
            d.rounded_rectangle([x0, t, r, b], radius=10, fill=(0, 120, 215))
            d.text(((x0 + r) / 2, (t + b) / 2), "Save", fill="white", font=big, anchor="mm")
            for i, note in enumerate(st.notes[st.scroll :]):
                top = (_LIST_TOP + i * _ROW) * h
                if top > h:
                    break
                d.line([w * 0.05, top + _ROW * h, w * 0.95, top + _ROW * h], fill=(220, 220, 220))
                d.text((w * 0.06, top + _ROW * h / 2), note, fill=(20, 20, 20), font=big, anchor="lm")
        elif st.foreground == SETTINGS:
            self._title(d, "Settings", big)
            for i, (label, ns, key) in enumerate(_TOGGLES):
                top = (_TOGGLE_TOP + i * _TOGGLE_ROW) * h
                mid = top + _TOGGLE_ROW * h / 2
                d.text((w * 0.06, mid), label, fill=(20, 20, 20), font=big, anchor="lm")
                on = st.settings.get(ns, {}).get(key, "0") == "1"
                sl, st_, sr, sb = w * 0.78, mid - h * 0.018, w * 0.92, mid + h * 0.018
                d.rounded_rectangle(
                    [sl, st_, sr, sb], radius=int(h * 0.018), fill=(0, 120, 215) if on else (180, 180, 180)
                )
                knob = sr - h * 0.018 if on else sl + h * 0.018
                d.ellipse(
                    [knob - h * 0.015, mid - h * 0.015, knob + h * 0.015, mid + h * 0.015], fill="white"
                )
        else:
            self._title(d, APPS[st.foreground][0], big)
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def _title(
        self, d: ImageDraw.ImageDraw, title: str, font: ImageFont.ImageFont | ImageFont.FreeTypeFont
    ) -> None:
        w, h = self.size
        d.rectangle([0, h * 0.035, w, h * 0.11], fill=(0, 90, 170))
        d.text((w * 0.05, h * 0.0725), title, fill="white", font=font, anchor="lm")
