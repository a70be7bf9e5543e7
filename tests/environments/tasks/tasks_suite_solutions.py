"""Scripted correct solutions of the local suite: what a competent agent would do, key by key.

Each solution is a list of small steps. `Key`, `Type` and `Click` become pyautogui code run
through the server's action endpoint (as an agent's actions are); `Until` waits, through
`/execute`, for a condition an agent would see on the screen (a window title, a saved file)
before going on; `Pause` lets an application catch up. Text is ASCII only: pyautogui's
`write` drops anything else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """A key or chord, in pyautogui names joined by '+', e.g. ``ctrl+s``."""

    keys: str

    def pyautogui(self) -> str:
        names = ", ".join(repr(k) for k in self.keys.split("+"))
        return f"pyautogui.hotkey({names})"


@dataclass(frozen=True)
class Goto:
    """A chord, then single keys, in one action with room between them: LibreOffice handles a
    chord's effect after keys already queued when it is busy, so ctrl+home sent as its own
    action could land after the first arrow (the cursor then ends one row short)."""

    chord: str
    keys: tuple[str, ...]

    def pyautogui(self) -> str:
        names = ", ".join(repr(k) for k in self.chord.split("+"))
        return (f"pyautogui.hotkey({names}); pyautogui.sleep(0.5); "
                f"pyautogui.press({list(self.keys)!r}, interval=0.1); pyautogui.sleep(0.3)")


@dataclass(frozen=True)
class Chords:
    """Chords in one action, half a second apart. A busy LibreOffice can drop a key sent in its
    first seconds, or act on a later one first; repeating an idempotent chord (``shift+end``)
    makes the selection land all the same."""

    chords: tuple[str, ...]

    def pyautogui(self) -> str:
        calls = [f"pyautogui.hotkey({', '.join(repr(k) for k in c.split('+'))})" for c in self.chords]
        return "; pyautogui.sleep(0.5); ".join(calls) + "; pyautogui.sleep(0.3)"


@dataclass(frozen=True)
class Type:
    text: str

    def pyautogui(self) -> str:
        return f"pyautogui.write({self.text!r}, interval=0.01)"


@dataclass(frozen=True)
class Click:
    x: int
    y: int
    clicks: int = 1

    def pyautogui(self) -> str:
        return f"pyautogui.click({self.x}, {self.y}, clicks={self.clicks})"


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Until:
    """Poll a shell condition in the desktop (exit 0) for up to `timeout` seconds.

    With `retry_key`, a condition still unmet halfway presses that key once more (a GTK
    Save As dialog sometimes swallows the first Enter).
    """

    shell: str
    timeout: float = 15.0
    retry_key: str | None = None


Step = Key | Goto | Chords | Type | Click | Pause | Until


def window(title: str) -> Until:
    """Wait until a visible window whose title contains `title` exists."""
    return Until(f"xdotool search --onlyvisible --name {title!r} >/dev/null")


def saved(path: str, text: str, retry_key: str | None = None) -> Until:
    """Wait until the file at `path` (``~`` allowed) contains `text`."""
    return Until(f"grep -qF {text!r} {path}", retry_key=retry_key)


def changed(path: str, stamp: str = "/tmp/.suite-stamp") -> Until:
    """Wait until `path` is newer than the stamp file written by `stamp_now`."""
    return Until(f"[ {path} -nt {stamp} ]")


def stamp_now(stamp: str = "/tmp/.suite-stamp") -> Until:
    """Record 'now' so `changed` can tell a fresh save (always true at once)."""
    return Until(f"sleep 1.1; touch {stamp}", timeout=5.0)


def _save_as(path: str) -> list[Step]:
    """GTK's Save As dialog: type the full name and confirm (the caller waits for the file)."""
    return [Key("ctrl+shift+s"), window("Save As"), Pause(0.5), Key("ctrl+a"), Type(path), Pause(0.3), Key("enter")]


#: An agent looks at the screen before its first action; LibreOffice may still be settling
#: in the first second after its window maps, and keys sent then can be lost.
LOOK = Pause(1.0)


def _calc_goto(cell: str) -> list[Step]:
    """Go to a cell (e.g. ``B7``) from A1 with the arrow keys, as a keyboard user would."""
    column = ord(cell[0].upper()) - ord("A")
    row = int(cell[1:]) - 1
    return [LOOK, Goto("ctrl+home", ("right",) * column + ("down",) * row)]


SOLUTIONS: dict[str, list[Step]] = {
    "mousepad-append-line": [
        Key("ctrl+end"),
        Type("apples\n"),
        Key("ctrl+s"),
        saved("~/Documents/groceries.txt", "apples"),
    ],
    "mousepad-fix-typos": [
        Key("ctrl+a"),
        Type("Dear Sam,\nThank you for the invitation.\nI will be there on Saturday.\n"),
        Key("ctrl+s"),
        saved("~/Documents/letter.txt", "I will be"),
    ],
    "mousepad-save-as": [
        Type("Meeting at 10 in room 4\n"),
        *_save_as("~/Documents/agenda.txt"),
        saved("~/Documents/agenda.txt", "Meeting at 10", retry_key="enter"),
    ],
    "terminal-make-dirs": [
        Type("mkdir -p ~/projects/alpha ~/projects/beta\n"),
        Until("[ -d ~/projects/beta ]"),
    ],
    # No '<' in typed text: pyautogui types it as '>' on X11.
    "terminal-count-lines": [
        Type("cat ~/data/access.log | wc -l > ~/data/count.txt\n"),
        Until("[ -s ~/data/count.txt ]"),
    ],
    "terminal-rename-extension": [
        Type('cd ~/photos && for f in *.jpeg; do mv "$f" "${f%.jpeg}.jpg"; done; echo renamed\n'),
        Until("! ls ~/photos | grep -q jpeg"),
    ],
    # pcmanfm lists folders and files by name; Home selects the first entry, alt+up opens the parent.
    "files-move-to-archive": [
        Key("home"),
        Key("ctrl+x"),
        Key("alt+up"),
        Pause(0.5),
        Key("home"),
        Key("enter"),
        window("Archive"),
        Pause(0.3),
        Key("ctrl+v"),
        Until("[ -e ~/Archive/invoice-march.txt ]"),
    ],
    "files-new-folder": [
        Key("ctrl+shift+n"),
        window("New Folder"),
        Pause(0.3),
        Key("ctrl+a"),
        Type("Receipts\n"),
        Until("[ -d ~/Documents/Receipts ]"),
    ],
    "files-copy-to-backup": [
        Key("home"),
        Key("ctrl+c"),
        Key("alt+up"),
        Pause(0.5),
        Key("home"),
        Key("enter"),
        window("Backup"),
        Pause(0.3),
        Key("ctrl+v"),
        Until("cmp -s ~/Documents/thesis.txt ~/Backup/thesis.txt"),
    ],
    "calc-sum-total": [
        *_calc_goto("B7"),
        Type("=SUM(B2:B6)\n"),
        stamp_now(),
        Key("ctrl+s"),
        changed("~/Documents/budget.xlsx"),
        Pause(0.5),
    ],
    "calc-amount-column": [
        *_calc_goto("D1"),
        Type("Amount\n=B2*C2\n=B3*C3\n=B4*C4\n=B5*C5\n"),
        stamp_now(),
        Key("ctrl+s"),
        changed("~/Documents/orders.xlsx"),
        Pause(0.5),
    ],
    # The task's postconfig saves the sheet, as OSWorld's Calc tasks do.
    "calc-fix-value": [
        *_calc_goto("B4"),
        Type("48\n"),
    ],
    "writer-retitle": [
        Until("xdotool getactivewindow getwindowname | grep -qF memo.docx"),
        LOOK,
        Chords(("ctrl+home", "shift+end", "shift+end")),
        Type("Final memo"),
        stamp_now(),
        Key("ctrl+s"),
        changed("~/Documents/memo.docx"),
        Pause(0.5),
    ],
    "writer-page-break": [
        LOOK,
        Key("ctrl+home"),
        Key("down"),
        Key("down"),
        Key("home"),
        Key("ctrl+enter"),
        stamp_now(),
        Key("ctrl+s"),
        changed("~/Documents/report.docx"),
        Pause(0.5),
    ],
}
