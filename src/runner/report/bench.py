"""The report's benchmark section: the rates per domain and the cost per module of a
benchmark run, read from its ``summary.json`` (written by ``agent-s3 bench``)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

__all__ = ["bench_section"]


def _pct(x: Any) -> str:
    return "—" if not isinstance(x, int | float) else f"{100 * x:.1f}%"


def bench_section(run_path: Path) -> str:
    """HTML for the run's benchmark metrics; empty when the run is not a benchmark."""
    try:
        data = json.loads((run_path / "summary.json").read_bytes())
    except (FileNotFoundError, ValueError):
        return ""
    if not isinstance(data, dict) or not isinstance(data.get("overall"), dict):
        return ""
    n = data.get("n", 0)
    rows = ["<tr><th>domain</th><th>tasks scored</th><th>errored</th><th>selected (blind)</th>"
            "<th>minimum + gain (oracle-filtered)</th><th>mean of rollouts</th>"
            f"<th>pass@{n}</th><th>judge accuracy</th><th>judge subset</th><th>judge errors</th>"
            "<th>critic errors</th></tr>"]
    groups = [*sorted((data.get("domains") or {}).items()), ("overall", data["overall"])]
    for name, g in groups:
        rows.append(f"<tr><td>{escape(str(name))}</td><td>{g.get('tasks', 0)}</td><td>{g.get('errored', 0)}</td>"
                    f"<td>{_pct(g.get('selected'))}</td><td>{_pct(g.get('min_gain'))}</td>"
                    f"<td>{_pct(g.get('mean_rollout'))}</td><td>{_pct(g.get('pass_at_n'))}</td>"
                    f"<td>{_pct(g.get('judge_accuracy'))}</td><td>{g.get('judge_subset', 0)}</td>"
                    # A failed judge is an error of its own, never a pick that scored 0.
                    f"<td>{g.get('judge_errors', 0)}</td><td>{g.get('critic_errors', 0)}</td></tr>")
    modules: dict[str, dict[str, Any]] = data.get("modules") or {}
    cost = ""
    if modules:
        head = "".join(f"<th>{escape(m)}</th>" for m in modules)
        lines = [f"<tr><th>per task</th>{head}</tr>"]
        for label, key, fmt in (("dollars", "dollars", "${:.4f}"), ("tokens", "tokens", "{:.0f}"),
                                ("mean seconds", "seconds", "{:.1f}"), ("median seconds", "median_seconds", "{:.1f}")):
            cells = "".join(f"<td>{fmt.format(float(c.get(key, 0.0)))}</td>" for c in modules.values())
            lines.append(f"<tr><td>{label}</td>{cells}</tr>")
        cost = ("<h3>cost per module</h3><table>" + "".join(lines) + "</table><p><small>rollout: per rollout "
                "(its agent's calls, wall time); other modules: per task.</small></p>")
    errored = data["overall"].get("errored") or 0
    note = (f"<p class=\"error\">{errored} errored tasks (setup or scorer failed) are left out of every rate, "
            "not counted as 0: see errors above.</p>") if errored else ""
    legend = ("<p><small>selected: the judge's pick on every task (blind selection, what a deployment gets); "
              "minimum + gain: tasks whose rollouts all score alike count that score without a judge and the "
              "others the pick (oracle-filtered: the evaluator decides which tasks are judged, as Agent-S's "
              "released selection scripts report); mean of rollouts: one rollout's expected score; pass@N: "
              "the best rollout (an oracle).</small></p>")
    return "<h2>benchmark</h2><table>" + "".join(rows) + "</table>" + legend + note + cost
