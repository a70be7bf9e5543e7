"""The policy's action grammar: one discriminated union of typed, validated actions.

Each class is one `agent.<name>(...)` call the model may write. Field order is the
positional order, field descriptions and class docstrings are what the prompt shows
(see `reference.py`), so the grammar, the parser and the prompt share one source.
Key names are checked against the platform passed as validation context
(`{"platform": "windows"}`); without context Ubuntu is assumed.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationInfo, field_validator

from agent_s3.keys import UnknownKey, normalize_key
from core.protocols import Platform

__all__ = [
    "ACTION_TYPES",
    "CONTROL_ACTIONS",
    "PLATFORM_ACTIONS",
    "Action",
    "ActionBase",
    "CallCodeAgent",
    "Click",
    "Done",
    "DragAndDrop",
    "Fail",
    "HighlightTextSpan",
    "HoldAndPress",
    "Hotkey",
    "Open",
    "Scroll",
    "SetCellValues",
    "SwitchApplications",
    "TypeText",
    "Wait",
    "action_adapter",
    "action_call",
    "action_fields",
    "action_name",
    "available_on",
]

MAX_DESCRIPTION = 500
MAX_TEXT = 5000
MAX_NAME = 200
MAX_SUBTASK = 4000
MAX_CELLS = 50
_CELL = re.compile(r"^[A-Z]{1,3}[1-9][0-9]{0,6}$")

Description = Annotated[str, Field(min_length=1, max_length=MAX_DESCRIPTION)]


def _platform(info: ValidationInfo) -> Platform:
    ctx = info.context or {}
    return ctx.get("platform", "ubuntu")


def _keys(value: list[str], info: ValidationInfo) -> list[str]:
    try:
        return [normalize_key(k, _platform(info)) for k in value]
    except UnknownKey as e:
        raise ValueError(str(e)) from None


class ActionBase(BaseModel):
    """Common configuration: strict types, no unknown arguments, immutable."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    #: True for actions that need an element located on screen.
    grounded: ClassVar[bool] = False


class Click(ActionBase):
    """Click on an element of the screen."""

    kind: Literal["click"] = "click"
    element_description: Description = Field(
        description="A detailed description of the element to click, specific enough to pick it out on the screen."
    )
    num_clicks: int = Field(default=1, ge=1, le=3, description="How many times to click (1 to 3).")
    button_type: Literal["left", "middle", "right"] = Field(
        default="left", description="Which mouse button to use."
    )
    hold_keys: list[str] = Field(
        default_factory=list, max_length=4, description="Keys held down while clicking, e.g. ['ctrl']."
    )
    grounded: ClassVar[bool] = True

    _check_keys = field_validator("hold_keys")(_keys)


class TypeText(ActionBase):
    """Type text, optionally after clicking an element to focus it."""

    kind: Literal["type"] = "type"
    element_description: str | None = Field(
        default=None,
        max_length=MAX_DESCRIPTION,
        description="The element to click before typing; None types into whatever has focus.",
    )
    text: str = Field(
        default="", max_length=MAX_TEXT, description="The text to type, exactly as it should appear."
    )
    overwrite: bool = Field(default=False, description="True selects and deletes the existing content first.")
    enter: bool = Field(default=False, description="True presses Enter after typing.")
    grounded: ClassVar[bool] = True


class Scroll(ActionBase):
    """Scroll inside an element with the mouse wheel."""

    kind: Literal["scroll"] = "scroll"
    element_description: Description = Field(description="The element to scroll in.")
    clicks: int = Field(
        ge=-50, le=50, description="Wheel clicks: positive scrolls up (or right), negative down (or left)."
    )
    horizontal: bool = Field(default=False, description="True scrolls sideways instead of up and down.")
    grounded: ClassVar[bool] = True

    @field_validator("clicks")
    @classmethod
    def _nonzero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("clicks must not be 0")
        return v


class DragAndDrop(ActionBase):
    """Press the mouse on one element, drag it and release it on another."""

    kind: Literal["drag_and_drop"] = "drag_and_drop"
    starting_description: Description = Field(description="The element where the drag starts.")
    ending_description: Description = Field(description="The element where it is dropped.")
    hold_keys: list[str] = Field(default_factory=list, max_length=4, description="Keys held during the drag.")
    grounded: ClassVar[bool] = True

    _check_keys = field_validator("hold_keys")(_keys)


class Hotkey(ActionBase):
    """Press a key combination, all keys together, e.g. ['ctrl', 'c']."""

    kind: Literal["hotkey"] = "hotkey"
    keys: list[str] = Field(min_length=1, max_length=5, description="The keys, modifiers first.")

    _check_keys = field_validator("keys")(_keys)


class HoldAndPress(ActionBase):
    """Hold some keys down while pressing others one after another."""

    kind: Literal["hold_and_press"] = "hold_and_press"
    hold_keys: list[str] = Field(min_length=1, max_length=4, description="Keys held down throughout.")
    press_keys: list[str] = Field(min_length=1, max_length=20, description="Keys pressed in order.")

    _check_keys = field_validator("hold_keys", "press_keys")(_keys)


class Open(ActionBase):
    """Open an application or a file by its name."""

    kind: Literal["open"] = "open"
    app_or_filename: str = Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=r"^[^\n\r\t]+$",
        description="The application or file name.",
    )

    @field_validator("app_or_filename")
    @classmethod
    def _no_parent_segments(cls, value: str) -> str:
        # A name that climbs out of where it starts ("../../x") is never needed to open an
        # app or a file the agent can see; refusing it keeps a reply from steering the
        # desktop's unsandboxed apps toward the host's folders.
        if ".." in value.replace("\\", "/").split("/"):
            raise ValueError("a name with '..' path segments is not allowed; give the app's name or the file's full path")
        return value


class SwitchApplications(ActionBase):
    """Bring an already open application window to the front."""

    kind: Literal["switch_applications"] = "switch_applications"
    app_code: str = Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=r"^[^\n\r\t]+$",
        description="The application's name or window title.",
    )


class HighlightTextSpan(ActionBase):
    """Select a span of visible text by dragging from its first words to its last words."""

    kind: Literal["highlight_text_span"] = "highlight_text_span"
    starting_phrase: Description = Field(
        description="The words where the selection starts, as shown on screen."
    )
    ending_phrase: Description = Field(description="The words where it ends, as shown on screen.")


class SetCellValues(ActionBase):
    """Write values or formulas straight into cells of an open LibreOffice Calc spreadsheet (no clicking or typing). Use it for filling or fixing cells; the cells change at once in the open document, which still has to be saved."""

    kind: Literal["set_cell_values"] = "set_cell_values"
    cell_values: dict[str, str | int | float | bool | None] = Field(
        min_length=1,
        max_length=MAX_CELLS,
        description="Cell address in A1 style to its new value, e.g. {'A1': 'Name', 'B2': 42, 'C2': '=B2*2'}: "
        "numbers as numbers, text as strings, a string starting with '=' as a formula, None to clear the cell.",
    )
    app_name: str = Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=r"^[^\n\r\t]+$",
        description="The spreadsheet document's name as its window title shows it, e.g. 'Untitled 1' or 'sales.xlsx'.",
    )
    sheet_name: str = Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=r"^[^\n\r\t]+$",
        description="The sheet to write in, as its tab shows it, e.g. 'Sheet1'.",
    )

    @field_validator("cell_values")
    @classmethod
    def _cells(cls, value: dict[str, Any]) -> dict[str, Any]:
        cells: dict[str, Any] = {}
        for address, item in value.items():
            key = address.strip().upper().replace("$", "")
            if not _CELL.match(key):
                raise ValueError(f"{address!r} is not a cell address; write single cells in A1 style such as 'B7'")
            if key in cells:
                raise ValueError(f"cell {key} is given twice")
            if isinstance(item, str) and len(item) > MAX_TEXT:
                raise ValueError(f"the value of {key} is longer than {MAX_TEXT} characters")
            cells[key] = item
        return cells


class Wait(ActionBase):
    """Do nothing for a while, e.g. until a page or an application has loaded."""

    kind: Literal["wait"] = "wait"
    seconds: float = Field(gt=0, le=60, description="How long to wait, in seconds (at most 60).")


class Done(ActionBase):
    """Declare the task complete. Only after you have seen on screen that it is."""

    kind: Literal["done"] = "done"


class Fail(ActionBase):
    """Declare the task impossible to complete."""

    kind: Literal["fail"] = "fail"


class CallCodeAgent(ActionBase):
    """Hand work to the code agent, which writes and runs Python or shell code in the background."""

    kind: Literal["call_code_agent"] = "call_code_agent"
    task: str | None = Field(
        default=None,
        max_length=MAX_SUBTASK,
        description="A focused subtask; None gives the code agent the original task unchanged.",
    )


Action = Annotated[
    Click
    | TypeText
    | Scroll
    | DragAndDrop
    | Hotkey
    | HoldAndPress
    | Open
    | SwitchApplications
    | HighlightTextSpan
    | SetCellValues
    | Wait
    | Done
    | Fail
    | CallCodeAgent,
    Field(discriminator="kind"),
]

#: Every action class in the order the prompt lists them.
ACTION_TYPES: tuple[type[ActionBase], ...] = (
    Click,
    TypeText,
    Scroll,
    DragAndDrop,
    Hotkey,
    HoldAndPress,
    Open,
    SwitchApplications,
    HighlightTextSpan,
    SetCellValues,
    Wait,
    Done,
    Fail,
    CallCodeAgent,
)

#: Actions with no GUI code; the caller acts on them (finish, sleep, run the code agent).
CONTROL_ACTIONS = frozenset({"wait", "done", "fail", "call_code_agent"})

#: Actions only some platforms can run (set_cell_values drives LibreOffice through its
#: Python bridge, which Agent S3 offers on Linux only).
PLATFORM_ACTIONS: dict[str, frozenset[str]] = {"set_cell_values": frozenset({"ubuntu"})}


def available_on(cls: type[ActionBase], platform: Platform) -> bool:
    """Whether the action can run on `platform`."""
    only = PLATFORM_ACTIONS.get(action_name(cls))
    return only is None or platform in only

action_adapter: TypeAdapter[Action] = TypeAdapter(Action)


def action_name(cls: type[ActionBase]) -> str:
    return cls.model_fields["kind"].default


def action_fields(cls: type[ActionBase]) -> list[str]:
    """Argument names in positional order."""
    return [n for n in cls.model_fields if n != "kind"]


_REQUIRED = object()


@cache
def _defaults(cls: type[ActionBase]) -> tuple[tuple[str, Any], ...]:
    """(argument, default or `_REQUIRED`) in positional order; pydantic inspects a default
    factory's signature on every call, and every step's history line needs these."""
    return tuple((name, _REQUIRED if cls.model_fields[name].is_required()
                  else cls.model_fields[name].get_default(call_default_factory=True)) for name in action_fields(cls))


def action_call(action: ActionBase) -> str:
    """The action as the `agent.<name>(...)` call the model would write (for history)."""
    args: list[str] = []
    for name, default in _defaults(type(action)):
        value: Any = getattr(action, name)
        if default is not _REQUIRED and value == default:
            continue
        args.append(f"{name}={value!r}")
    return f"agent.{action.kind}({', '.join(args)})"  # type: ignore[attr-defined]
