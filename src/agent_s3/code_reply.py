"""Reading the coding agent's and its summarizer's replies.

Replies are untrusted text: nothing here runs them. Each rejection costs the coding agent
one of its steps, so realistic replies must parse: reasoning around the block (``<think>``
drafts removed first), a DONE followed by verification notes ("DONE - verified the file has
12 rows"), the prompt's own ``DONE   (the task is complete ...)``, output samples in
``text`` blocks, the same block restated. Refused, with one line of feedback: two different
code blocks (a quoted failing block and its fix would otherwise run together), an unknown
language, an empty block, both DONE and FAIL, a "done" that is prose ("Done inspecting the
file; now I'll modify it"), a DONE that announces more work, no block and no DONE/FAIL.
"""

from __future__ import annotations

import json
import re

from core.protocols import Platform, SandboxLanguage
from core.replies import strip_reasoning

__all__ = ["LANGUAGES", "PROMPT_LANGUAGES", "CodeReply", "parse_code_reply", "parse_summary", "thoughts_of"]

#: Fence labels the sandbox runs, per platform.
LANGUAGES: dict[str, dict[str, SandboxLanguage]] = {
    "ubuntu": {"python": "python", "py": "python", "python3": "python",
               "bash": "bash", "sh": "bash", "shell": "bash"},
    "windows": {"python": "python", "py": "python", "python3": "python",
                "powershell": "powershell", "ps1": "powershell", "pwsh": "powershell", "ps": "powershell",
                "cmd": "cmd", "bat": "cmd", "batch": "cmd"},
}  # fmt: skip
#: The labels the prompt names, per platform.
PROMPT_LANGUAGES = {"ubuntu": ["python", "bash"], "windows": ["python", "powershell", "cmd"]}
#: Fence labels of blocks that show output or data, not code to run.
_NOT_CODE = {"text", "txt", "output", "console", "plaintext", "log", "csv", "json", "yaml", "diff", "markdown", "md"}
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_DECORATION = "*_`#>:.!- \t"
_CONTROL_WORD = re.compile(r"(DONE|FAIL)(?![A-Za-z0-9_])", re.IGNORECASE)
#: After a lower- or title-case "done"/"fail" opening the answer: only the end of the line
#: or a mark ("done.", "Done - verified"), never a word ("Done inspecting the file").
_CONTROL_END = re.compile(r"\s*(?:$|[.!:;,)\]–—-])")
#: Words that announce further work; a DONE beside them is no final answer.
_MORE_WORK = re.compile(r"\b(?:now\s+i(?:'ll|\s+will)|next,?\s+i(?:'ll|\s+will)|i\s+will\s+now|i'll\s+now|"
                        r"let\s+me\s+now|then\s+i(?:'ll|\s+will)|the\s+next\s+step\s+is|still\s+(?:need|have)\s+to)\b",
                        re.IGNORECASE)

CodeReply = tuple[str, SandboxLanguage | None, str | None, str | None]


def _tag(text: str, name: str) -> str | None:
    """The last closed ``<name>`` section, else an unclosed one running to the end."""
    closed = re.findall(rf"<{name}>((?:(?!<{name}>).)*?)</{name}>", text, re.DOTALL | re.IGNORECASE)
    if closed:
        return str(closed[-1]).strip()
    opened = list(re.finditer(rf"<{name}>", text, re.IGNORECASE))
    return text[opened[-1].end():].strip() if opened else None


def _without_thoughts(text: str) -> str:
    return strip_reasoning(text)


def _control(body: str) -> str | None:
    """DONE or FAIL when the answer says so: as the first word of the answer (capitals with
    any notes after it; another case only with nothing or a mark after it), or as a line of
    its own in capitals. None when neither; ValueError when it says both, or says DONE and
    announces more work."""
    words: set[str] = set()
    first = body.strip().lstrip(_DECORATION)
    m = _CONTROL_WORD.match(first)
    if m and (m.group(1).isupper() or _CONTROL_END.match(first, m.end())):
        words.add(m.group(1).upper())
    for line in body.splitlines():
        line = line.strip().lstrip(_DECORATION)
        m = re.match(r"(DONE|FAIL)(?![A-Za-z0-9_])", line)  # capitals only: "done" in prose is not an answer
        if m:
            words.add(m.group(1))
    if len(words) > 1:
        raise ValueError("the answer says both DONE and FAIL; answer with exactly one of them")
    if words and (more := _MORE_WORK.search(body)):
        raise ValueError(f"the answer says {next(iter(words))} but also announces more work ({more.group(0)!r}); "
                         "answer DONE only when the task is complete, else give the next code block")
    return words.pop() if words else None


def thoughts_of(text: str) -> str:
    """The reply's reasoning section, if it has one."""
    return _tag(text, "thoughts") or _tag(text, "think") or ""


def parse_code_reply(text: str, platform: Platform) -> CodeReply:
    """(thoughts, language, code, control) or ValueError with feedback for the model.

    Code wins over a DONE in the same reply: the code has not run yet, so its result is
    still to be checked. Reasoning drafts are removed first, so a block or a DONE inside
    one is never read."""
    thoughts = thoughts_of(text)
    rest = _without_thoughts(text)
    answer = _tag(rest, "answer")
    body = answer if answer is not None else rest
    langs = LANGUAGES.get(platform, {})
    allowed = ", ".join(PROMPT_LANGUAGES.get(platform, []))
    runnable: list[tuple[SandboxLanguage, str]] = []
    for label, code in _FENCE.findall(body):
        label = label.lower()
        if label in _NOT_CODE:
            continue
        if label not in langs:
            raise ValueError(f"a code block is marked {label or 'with no language'!r}; mark it as one of: {allowed}")
        runnable.append((langs[label], code.strip("\n")))
    if runnable:
        kinds = sorted({lang for lang, _ in runnable})
        if len(kinds) > 1:
            raise ValueError(f"found code blocks in {' and '.join(kinds)}; answer with one language per step")
        blocks = list(dict.fromkeys(c for _, c in runnable if c.strip()))
        if len(blocks) > 1:
            raise ValueError(f"the answer holds {len(blocks)} different code blocks (a quoted block besides the one to "
                             "run?); put exactly the code to run in one block")
        if not blocks:
            raise ValueError("the code block is empty")
        return thoughts, runnable[0][0], blocks[0], None
    control = _control(body)
    if control is not None:
        return thoughts, None, None, control
    raise ValueError("no code block and no DONE/FAIL; answer with one fenced code block, DONE or FAIL")


_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)]|\(\d{1,3}\)|\[[ xX]?\])\s*")
_HEADING = re.compile(r"^\s*(?:#+\s*)?(\*\*)?(summary|checklist)(\*\*)?\s*(:)?\s*(\*\*)?\s*(.*)$", re.IGNORECASE)


def _items(block: str) -> list[str]:
    out: list[str] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        item = _ITEM.sub("", line).strip()
        if _ITEM.match(line) or not out:
            out.append(item)
        else:
            out[-1] = f"{out[-1]} {item}"  # a wrapped item continues
    return [i for i in out if i]


def _sections_by_heading(text: str) -> dict[str, str]:
    """``Summary:`` / ``## Checklist`` style sections of an untagged reply; the text
    before the first heading is under ``""``."""
    found: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m and (m.group(4) or line.lstrip().startswith(("#", "**"))) and (m.group(4) or not m.group(6)):
            current = m.group(2).lower()
            found[current] = [m.group(6)] if m.group(6) else []
        else:
            found[current].append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def parse_summary(text: str) -> tuple[str, list[str]]:
    """(summary, checklist) of a summarizer reply: tagged sections, a JSON object, or
    ``Summary:`` / ``Checklist:`` headings; else the whole reply is the summary."""
    text = _without_thoughts(text).strip()
    summary, checklist = _tag(text, "summary"), _tag(text, "checklist")
    if summary is not None or checklist is not None:
        if summary is None:
            summary = re.sub(r"<checklist>.*", "", text, flags=re.DOTALL | re.IGNORECASE).strip()
        return summary, _items(checklist or "")
    unfenced = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", text)
    if unfenced.startswith("{"):
        try:
            value = json.loads(unfenced)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("summary"), str):
            items = value.get("checklist") or []
            return value["summary"].strip(), [str(i).strip() for i in items if str(i).strip()] if isinstance(items, list) else []
    headed = _sections_by_heading(text)
    if "summary" in headed or "checklist" in headed:
        return headed.get("summary", headed[""]), _items(headed.get("checklist", ""))
    return text, []
