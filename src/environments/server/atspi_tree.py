"""Dump the desktop's AT-SPI accessibility tree as XML in OSWorld's form (stdlib + pyatspi only).

Run as a child of the controller server with the system interpreter that has Debian's
`python3-pyatspi` (``/usr/bin/python3 -I atspi_tree.py serve``), as the desktop's user and
with its D-Bus session: the server's own interpreter may be a virtualenv without the GObject
bindings. It stays up (bindings imported and the bus connected once) and answers one JSON
line per request line: ``tree`` gives ``{"AT": xml}``, ``terminal`` gives ``{"output":
text-or-null}``, and ``{"error": message}`` says the platform offers no accessibility bus.
``tree`` and ``terminal`` as a command-line argument answer once and exit.

The XML is what OSWorld's Ubuntu server produces (../shared/reference/osworld.md §1.5, its
``_create_atspi_node``): root ``desktop-frame``, one subtree per application, tags are role
names with spaces turned into ``-``; states as ``st:<state>="true"`` spelled as the state's
enum name (``st:has_tooltip``); AT-SPI attributes as ``attr:<key>``; geometry of visible and
showing nodes as ``cp:screencoord`` and ``cp:size``; ``image="true"`` and
``selection="true"`` for nodes with those interfaces; values as ``val:*``; every action as
``act:<name>_desc`` / ``act:<name>_kb`` (spaces in the name as ``-``); the node's text as
element text. Depth is capped at 50 and children at 1024 per node, except a spreadsheet's
tables (a ``table`` under a ``document spreadsheet``), which list the cells on screen: row
by row over LibreOffice's column count (1024 before 7.4, else 16384), as OSWorld walks them.
``terminal`` is OSWorld's ``/terminal``: the focused terminal of gnome-terminal's active
window, looked for only when such a window exists (a quick check, as there).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

NAMESPACES = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
MAX_DEPTH = 50
MAX_CHILDREN = 1024
MAX_ROW = 1_048_576
#: The terminal application OSWorld's /terminal reads.
TERMINAL_APP = "gnome-terminal-server"
#: Object replacement and replacement characters carry no text.
_NOISE = {0xFFFC: None, 0xFFFD: None}


def _q(prefix: str, name: str) -> str:
    return f"{{{NAMESPACES[prefix]}}}{name}"


def _safe(call: Any, default: Any = None) -> Any:
    """AT-SPI calls fail on objects that vanish mid-walk; a dead node keeps what it had."""
    try:
        return call()
    except Exception:
        return default


def _tag(role: str) -> str:
    tag = (role.strip() or "unknown").replace(" ", "-")
    return tag if tag[:1].isalpha() else f"x-{tag}"


def libreoffice_columns() -> int:
    """Calc's column count, which sets how its table's children are numbered."""
    try:
        out = subprocess.run(["libreoffice", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 16384
    found = re.search(r"(\d+)\.(\d+)", out)
    return 1024 if found and (int(found.group(1)), int(found.group(2))) < (7, 4) else 16384


class Walker:
    """Builds OSWorld's XML for nodes of one AT-SPI registry."""

    def __init__(self, atspi: Any) -> None:
        self.atspi = atspi
        self._columns: int | None = None

    @property
    def columns(self) -> int:
        if self._columns is None:
            self._columns = libreoffice_columns()
        return self._columns

    def desktop(self) -> ET.Element:
        root = ET.Element("desktop-frame")
        desktop = self.atspi.Registry.getDesktop(0)
        for index in range(min(_safe(lambda: desktop.childCount, 0) or 0, MAX_CHILDREN)):
            app = _safe(lambda i=index: desktop.getChildAtIndex(i))
            if app is not None:
                root.append(self.node(app, 1))
        return root

    def node(self, node: Any, depth: int, flag: str | None = None) -> ET.Element:
        atspi = self.atspi
        attrs: dict[str, str] = {"name": _safe(lambda: node.name, "") or ""}
        state_set = _safe(node.getState)
        for state in (_safe(state_set.get_states, []) if state_set is not None else []):
            name = str(atspi.StateType._enum_lookup.get(state, "")).split("_", 1)[-1].lower()
            if name:
                attrs[_q("st", name)] = "true"
        for key, value in (_safe(node.get_attributes, {}) or {}).items():
            if key:
                attrs[_q("attr", str(key))] = str(value)
        if attrs.get(_q("st", "visible")) == "true" and attrs.get(_q("st", "showing")) == "true":
            component = _safe(node.queryComponent)
            extents = _safe(lambda: component.getExtents(atspi.XY_SCREEN)) if component is not None else None
            if extents is not None:
                attrs[_q("cp", "screencoord")] = str((extents.x, extents.y))
                attrs[_q("cp", "size")] = str((extents.width, extents.height))
        text = ""
        text_iface = _safe(node.queryText)
        if text_iface is not None:
            text = (_safe(lambda: text_iface.getText(0, text_iface.characterCount), "") or "").translate(_NOISE)
        if _safe(node.queryImage) is not None:
            attrs["image"] = "true"
        if _safe(node.querySelection) is not None:
            attrs["selection"] = "true"
        value = _safe(node.queryValue)
        if value is not None:
            for field, getter in (
                ("value", lambda: value.currentValue),
                ("min", lambda: value.minimumValue),
                ("max", lambda: value.maximumValue),
                ("step", lambda: value.minimumIncrement),
            ):
                got = _safe(getter)
                if got is not None:
                    attrs[_q("val", field)] = str(got)
        action = _safe(node.queryAction)
        if action is not None:
            for index in range(_safe(lambda: action.nActions, 0) or 0):
                name = (_safe(lambda i=index: action.getName(i), "") or "").replace(" ", "-")
                attrs[_q("act", f"{name}_desc")] = _safe(lambda i=index: action.getDescription(i), "") or ""
                attrs[_q("act", f"{name}_kb")] = _safe(lambda i=index: action.getKeyBinding(i), "") or ""
        role = (_safe(node.getRoleName, "") or "").strip()
        if flag is None:
            if role == "document spreadsheet":
                flag = "calc"
            elif role == "application" and attrs["name"] == "Thunderbird":
                flag = "thunderbird"
        element = ET.Element(_tag(role), attrs)
        if text:
            element.text = text
        if depth == MAX_DEPTH:
            return element
        if flag == "calc" and _tag(role) == "table":
            self._showing_cells(node, element, depth, flag)
            return element
        count = min(_safe(lambda: node.childCount, 0) or 0, MAX_CHILDREN)
        for index in range(count):
            child = _safe(lambda i=index: node.getChildAtIndex(i))
            if child is not None:
                element.append(self.node(child, depth + 1, flag))
        return element

    def _showing_cells(self, table: Any, element: ET.Element, depth: int, flag: str) -> None:
        """The cells on screen, found as OSWorld finds them: rows of `columns` children, from
        the first showing column to the first hidden one after it; rows until one has none
        past that column (at most 500 rows or columns looked at before the first showing)."""
        showing_state = self.atspi.STATE_SHOWING
        index_base, first_showing, column_base = 0, False, None
        for row in range(MAX_ROW):
            column = column_base or 0
            for column in range(column_base or 0, self.columns):
                cell = _safe(lambda i=index_base + column: table.getChildAtIndex(i))
                showing = cell is not None and bool(_safe(lambda c=cell: c.getState().contains(showing_state)))
                if showing:
                    element.append(self.node(cell, depth + 1, flag))
                    if not first_showing:
                        column_base, first_showing = column, True
                elif (first_showing and column_base is not None) or column >= 500:
                    break
            if (first_showing and column == column_base) or (not first_showing and row >= 500):
                break
            index_base += self.columns

    def terminal(self) -> str | None:
        """OSWorld's /terminal: nothing unless gnome-terminal has an active window; then the
        text of the one focused terminal in that window."""
        desktop = self.atspi.Registry.getDesktop(0)
        active = self.atspi.STATE_ACTIVE
        for index in range(min(_safe(lambda: desktop.childCount, 0) or 0, MAX_CHILDREN)):
            app = _safe(lambda i=index: desktop.getChildAtIndex(i))
            if app is None or _safe(lambda a=app: a.name) != TERMINAL_APP:
                continue
            frames = [
                f
                for f in (_safe(lambda i=i, a=app: a.getChildAtIndex(i)) for i in range(_safe(lambda a=app: a.childCount, 0) or 0))
                if f is not None and _safe(f.getRoleName) == "frame" and _safe(lambda f=f: f.getState().contains(active))
            ]
            if not frames:
                continue
            tree = self.node(app, 1)
            focused = _q("st", "focused")
            found = [
                t
                for frame in tree
                if frame.tag == "frame" and frame.get(_q("st", "active")) == "true"
                for t in frame.iter("terminal")
                if t.get(focused) == "true"
            ]
            return (found[0].text or "").rstrip() if len(found) == 1 else None
        return None


def answer(walker: Walker, mode: str) -> dict[str, Any]:
    try:
        if mode == "terminal":
            return {"output": walker.terminal()}
        if mode == "tree":
            return {"AT": ET.tostring(walker.desktop(), encoding="unicode")}
        return {"error": f"unknown request {mode!r}"}
    except Exception as exc:
        return {"error": f"the AT-SPI bus is not reachable ({exc}); start a D-Bus session"}


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "tree"
    try:
        import pyatspi
    except ImportError as exc:
        missing = json.dumps({"error": f"no AT-SPI bindings ({exc}); install python3-pyatspi and at-spi2-core"})
        for _ in sys.stdin if mode == "serve" else [mode]:  # a worker answers every request the same
            print(missing, flush=True)
        return 2
    for prefix, uri in NAMESPACES.items():
        ET.register_namespace(prefix, uri)
    walker = Walker(pyatspi)
    if mode != "serve":
        reply = answer(walker, mode)
        print(json.dumps(reply), flush=True)
        return 2 if "error" in reply else 0
    for line in sys.stdin:
        print(json.dumps(answer(walker, line.strip())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
