"""Pointer events read from pyautogui code, for trajectories that recorded only code
(OSWorld's ``traj.jsonl``). The code is parsed with `ast` and only literal numbers are
read; nothing is ever executed."""

from __future__ import annotations

import ast

from core.trajectory import PointerEvent

__all__ = ["pointer_events"]

_KINDS = {
    "click": "click", "doubleClick": "click", "tripleClick": "click", "rightClick": "click",
    "middleClick": "click", "mouseDown": "click", "mouseUp": "click",
    "moveTo": "move", "scroll": "move", "vscroll": "move", "hscroll": "move",
    "dragTo": "drag",
}


def _number(node: ast.expr | None) -> float | None:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _xy(call: ast.Call, name: str) -> tuple[float, float] | None:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if name in ("scroll", "vscroll", "hscroll"):
        x, y = keywords.get("x"), keywords.get("y")
        if x is None and len(call.args) >= 3:
            x, y = call.args[1], call.args[2]
    else:
        x = call.args[0] if call.args else keywords.get("x")
        y = call.args[1] if len(call.args) > 1 else keywords.get("y")
        if isinstance(x, ast.Tuple | ast.List) and len(x.elts) == 2:
            x, y = x.elts
    fx, fy = _number(x), _number(y)
    return (fx, fy) if fx is not None and fy is not None else None


def pointer_events(code: str | None) -> list[PointerEvent]:
    """Click/move/drag events of `code` in order; unparsable code gives none."""
    if not code:
        return []
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    found: list[tuple[int, int, PointerEvent]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name not in _KINDS or not (isinstance(node.func.value, ast.Name) and node.func.value.id == "pyautogui"):
            continue
        xy = _xy(node, name)
        if xy is None:
            continue
        event = PointerEvent(kind=_KINDS[name], x=round(xy[0]), y=round(xy[1]))  # type: ignore[arg-type]
        found.append((node.lineno, node.col_offset, event))
    found.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in found]
