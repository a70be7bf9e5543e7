"""Verdicts AgentRewardBench's scorer released, read as they are published.

**results.json** (``scripts/score_judgments.py``'s output, also published with other
judges' results, e.g. WebJudge's): ``{judge: {benchmark: {agent: {category: {"y_human":
[...], "y_judge": [...]}}}}}``. The vectors carry no ids: they are the scorer's records in
its row order, which is the annotations file's row order after its filters (the split,
the primary annotator, sure labels), one vector per benchmark (``workarena++`` split off
WorkArena) and agent, plus ``all`` aggregates. Each (benchmark, agent) vector is laid over
the labels of that group in their order; it is used only when it matches them exactly:
same length, and ``y_human`` equal to the labels position by position (else one line says
where they part, usually a missing ``--only split=...``). The ``all`` vectors must then
agree with what the per-group ones give. ``-1`` (the scorer's ``n/a``: a judgment without
a response) is an error, not a rejection. A judge whose vectors are all empty gave no
verdicts.

**Judgment folders** (the scorer's input): ``<base>/<benchmark>/<agent>/<judge>/<task
id>.json``, one JSON object per trajectory with the judge's chat-completion ``response``.
The verdict is read from the reply the way its publisher read that judge: ``functional``
from ``trajectory_info.summary_info.cum_reward`` (> 0.5), ``aer``/``aerv`` from the reply's
last line starting ``Status:`` (AgentRewardBench's scorer), ``webjudge`` as WebJudge's own
code reads it (Online-Mind2Web's ``extract_predication``: success when "success" appears
between the first ``status:``, in any case, and the next), ``nnetnav`` from its ``Reward:``
(4 or 5 is success), any other judge from its ``<success>...</success>`` tag. A reply the rule cannot read, or a
judgment without a response, is an error (the scorer counts the first as a rejection and
the second as ``n/a``; ``--errors reject`` counts both as rejections).

`read_released` returns every judge found, those without a verdict too (empty
``predictions``), so a caller can say which it left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bench import LabelEntry, shown

__all__ = ["Released", "is_judgment_folder", "is_results_file", "read_released"]

#: The scorer's label for every benchmark or every agent.
_SCORER_ALL = "all"
_CATEGORY = "trajectory_success"
_STATUS_JUDGES = ("aer", "aerv")
_YES = ("successful", "yes", "success")
_NO = ("unsuccessful", "no", "failure", "unsuccesful")


@dataclass
class Released:
    """One judge's verdicts by label id, and what the reader noticed."""

    name: str
    predictions: dict[str, int | None]
    errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _is_results(data: object) -> bool:
    if not isinstance(data, dict) or not data:
        return False
    judge = next(iter(data.values()))
    if not isinstance(judge, dict) or not judge:
        return False
    bench = next(iter(judge.values()))
    if not isinstance(bench, dict) or not bench:
        return False
    agent = next(iter(bench.values()))
    return isinstance(agent, dict) and isinstance(agent.get(_CATEGORY), dict) and "y_judge" in agent[_CATEGORY]


def is_results_file(path: Path) -> bool:
    """Whether `path` is a results.json of the scorer (judge → benchmark → agent → vectors)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    try:
        return _is_results(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def is_judgment_folder(path: Path) -> bool:
    """Whether `path` holds judgments as ``<benchmark>/<agent>/<judge>/<task>.json``."""
    return path.is_dir() and next(path.glob("*/*/*/*.json"), None) is not None


def read_released(path: Path, labels: Sequence[LabelEntry]) -> list[Released]:
    """Every judge's verdicts in a results.json or a judgment folder, by the labels' ids."""
    if path.is_dir():
        return _folder(path, labels)
    data = _load(path)
    if not _is_results(data):
        raise ValueError(f"{path}: not a results.json of AgentRewardBench's scorer "
                         f"(judge -> benchmark -> agent -> {_CATEGORY} -> y_human, y_judge)")
    return _results(path, data, labels)


# -- results.json ----------------------------------------------------------------------------


def _field(entry: LabelEntry, name: str) -> str | None:
    value = (entry.model_extra or {}).get(name)
    return None if value is None else str(value)


def _groups(path: Path, labels: Sequence[LabelEntry]) -> dict[tuple[str, str], list[LabelEntry]]:
    groups: dict[tuple[str, str], list[LabelEntry]] = {}
    for e in labels:
        benchmark, agent = _field(e, "benchmark"), _field(e, "agent")
        if benchmark is None or agent is None:
            raise ValueError(f"{path} holds AgentRewardBench's verdicts by benchmark and agent, but label "
                             f"{e.id!r} names no benchmark or agent: give AgentRewardBench's annotations.csv")
        groups.setdefault((benchmark, agent), []).append(e)
    return groups


def _vectors(where: str, cell: object) -> tuple[list[object], list[object]]:
    vectors = cell.get(_CATEGORY) if isinstance(cell, dict) else None
    human = vectors.get("y_human") if isinstance(vectors, dict) else None
    judged = vectors.get("y_judge") if isinstance(vectors, dict) else None
    if not isinstance(human, list) or not isinstance(judged, list) or len(human) != len(judged):
        raise ValueError(f"{where}: expected {_CATEGORY} with y_human and y_judge lists of one length")
    return human, judged


def _verdict(value: object, where: str) -> int | None:
    if value in (0, 1) and not isinstance(value, bool | float):
        return int(value)  # type: ignore[call-overload]
    if value == -1 and not isinstance(value, bool | float):
        return None
    raise ValueError(f"{where}: a verdict is 0, 1 or -1 (no response), not {shown(value)}")


def _judge(path: Path, judge: str, table: object, labels: Sequence[LabelEntry],
           groups: dict[tuple[str, str], list[LabelEntry]]) -> Released:
    where = f"{path}: {judge[:80]}"
    if not isinstance(table, dict):
        raise ValueError(f"{where}: expected benchmarks, not {shown(table)}")
    out = Released(judge, {})
    leaves: dict[tuple[str, str], tuple[list[object], list[object]]] = {}
    for benchmark, agents in table.items():
        if not isinstance(agents, dict):
            raise ValueError(f"{where}/{shown(benchmark)}: expected agents, not {shown(agents)}")
        for agent, cell in agents.items():
            if _SCORER_ALL not in (benchmark, agent):
                leaves[(benchmark, agent)] = _vectors(f"{where}/{benchmark}/{agent}", cell)
    if not any(judged for _, judged in leaves.values()):
        return out  # a judge without verdicts (every vector empty): nothing to score
    for (benchmark, agent), (human, judged) in leaves.items():
        here = f"{where}/{benchmark}/{agent}"
        rows = groups.get((benchmark, agent), [])
        if len(judged) != len(rows):
            raise ValueError(
                f"{here}: {len(judged)} verdicts, but the labels hold {len(rows)} trajectories of that benchmark "
                f"and agent; the scorer scores one split of primary annotations: add --only split=test "
                f"(or split=dev) as it was made")
        for k, (entry, said) in enumerate(zip(rows, human, strict=True)):
            if said != entry.label:
                raise ValueError(
                    f"{here}: position {k} has y_human {shown(said)} but the labels say {entry.label} for "
                    f"{entry.id}: these verdicts were made on other labels or in another order")
        for k, (entry, value) in enumerate(zip(rows, judged, strict=True)):
            verdict = _verdict(value, f"{here}[{k}]")
            out.predictions[entry.id] = verdict
            if verdict is None:
                out.errors[entry.id] = "the judge gave no response (the scorer's n/a, -1)"
    _check_aggregates(where, table, labels, out.predictions)
    uncovered = sorted({f"{b}/{a}" for (b, a), rows in groups.items() if rows and (b, a) not in leaves})
    if uncovered:
        out.notes.append(f"{judge}: no verdicts for {', '.join(uncovered[:4])}{', ...' if len(uncovered) > 4 else ''}")
    return out


def _check_aggregates(where: str, table: Mapping[str, Any], labels: Sequence[LabelEntry],
                      predictions: Mapping[str, int | None]) -> None:
    """The ``all`` vectors must be what the per-group verdicts give in the labels' order."""
    for benchmark, agents in table.items():
        for agent, cell in agents.items():
            if _SCORER_ALL not in (benchmark, agent):
                continue
            rows = [e for e in labels if e.id in predictions
                    and benchmark in (_SCORER_ALL, _field(e, "benchmark")) and agent in (_SCORER_ALL, _field(e, "agent"))]
            expected = [-1 if predictions[e.id] is None else predictions[e.id] for e in rows]
            if _vectors(f"{where}/{benchmark}/{agent}", cell)[1] != expected:
                raise ValueError(f"{where}/{benchmark}/{agent}: the aggregate vector disagrees with the per-group "
                                 f"verdicts laid over the labels; this file's rows are in another order")


def _results(path: Path, data: dict[str, Any], labels: Sequence[LabelEntry]) -> list[Released]:
    groups = _groups(path, labels)
    return [_judge(path, judge, table, labels, groups) for judge, table in data.items()]


# -- judgment folders ------------------------------------------------------------------------


def _content(judgment: Mapping[str, Any]) -> str | None:
    response = judgment.get("response")
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices:
        return None
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


def _word(text: str | None) -> int | None:
    if text is None:
        return None
    word = text.strip().lower().replace("'", "").replace('"', "")
    return 1 if word in _YES else 0 if word in _NO else None


def _status(reply: str) -> str | None:
    found = None
    for line in reply.split("\n"):
        if line.startswith("Status:"):
            found = line.split(":", 1)[1]  # the scorer keeps the last Status line
    return found


def _read_verdict(judge: str, judgment: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """(verdict, why there is none)."""
    if judge == "functional":
        try:
            reward = float(judgment["trajectory_info"]["summary_info"]["cum_reward"])
        except (KeyError, TypeError, ValueError):
            return None, "no trajectory_info.summary_info.cum_reward"
        return int(reward > 0.5), None
    reply = _content(judgment)
    if reply is None:
        return None, "the judgment has no response (the scorer's n/a)"
    if judge == "webjudge":
        parts = reply.lower().split("status:")
        if len(parts) < 2:
            return None, "no status: in the reply (WebJudge counts it a failure)"
        return int("success" in parts[1]), None
    if judge in _STATUS_JUDGES:
        status = _status(reply)
        verdict = _word(status)
        return (verdict, None) if verdict is not None else (None, f"no readable Status: line ({shown(status)})")
    if judge == "nnetnav":
        _, sep, tail = reply.partition("Reward:")
        score = tail.strip()
        if not sep or not score.isdigit() or not 1 <= int(score) <= 5:
            return None, f"no Reward: 1-5 in the reply ({shown(score or None)})"
        return int(int(score) >= 4), None
    match = re.search(r"<success>(.*?)</success>", reply, re.DOTALL)
    verdict = _word(match.group(1) if match else None)
    return (verdict, None) if verdict is not None else (None, "no readable <success> tag in the reply")


def _folder(base: Path, labels: Sequence[LabelEntry]) -> list[Released]:
    known = {e.id for e in labels}
    judges: dict[str, Released] = {}
    for file in sorted(base.glob("*/*/*/*.json")):
        judge_dir = file.parent
        benchmark, agent, judge = judge_dir.parent.parent.name, judge_dir.parent.name, judge_dir.name
        ident = f"{benchmark}/{agent}/{file.stem}"
        out = judges.setdefault(judge, Released(judge, {}))
        if ident in out.predictions:
            raise ValueError(f"{file}: a second judgment of {ident} by {judge}")
        data = _load(file)
        if not isinstance(data, dict):
            raise ValueError(f"{file}: a judgment is one JSON object")
        verdict, why = _read_verdict(judge, data)
        out.predictions[ident] = verdict
        if why is not None:
            out.errors[ident] = why
    for judge, out in judges.items():
        matched = sum(i in known for i in out.predictions)
        out.notes.append(f"{judge}: {len(out.predictions)} judgments in {base}, {matched} of them labelled here"
                         + (f", {len(out.errors)} unreadable" if out.errors else ""))
    if not judges:
        raise ValueError(f"{base}: no judgments as <benchmark>/<agent>/<judge>/<task id>.json inside")
    return list(judges.values())

