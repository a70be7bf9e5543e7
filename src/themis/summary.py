"""A verdict told in a few plain lines, for the command line and the run report.

The report escapes and styles these lines itself; the full deliberation stays in
``critic-<name>.json``.
"""

from __future__ import annotations

from .record import Check, LastKRecord, OtherRecord, SequentialRecord, ThemisRecord, ThemisVoteRecord, Verdict

__all__ = ["summarize"]


def _check(c: Check) -> str:
    mark = "assumed (no verifier)" if c.assumed else {"success": "pass", "failure": "FAIL", "uncertain": "uncertain",
                                                       None: "unverified"}[c.verdict]
    origin = " (reviewer re-check)" if c.source == "reviewer" else ""
    detail = c.feedback if c.verdict != "success" else "; ".join(c.evidence[:2])
    return f"  step {c.milestone.step}{origin}: {mark}: {c.milestone.goal}" + (f" -> {detail}" if detail else "")


def _decision(verdict: Verdict) -> str:
    if verdict.error is not None:
        return "ERROR (no verdict)"
    return "ACCEPT" if verdict.reward == 1 else "REJECT"


def summarize(verdict: Verdict) -> list[str]:
    """Headline, then what the critic looked at and found, one item a line."""
    head = (f"{verdict.critic} ({verdict.model}): {_decision(verdict)} "
            f"after {verdict.calls} calls in {verdict.seconds:.1f}s: {verdict.reason}")
    lines = [head]
    record = verdict.record
    if isinstance(record, ThemisVoteRecord):
        for i, (reward, error) in enumerate(zip(record.rewards, record.errors or [None] * len(record.rewards),
                                                strict=True), start=1):
            said = "error: " + error if error else {1: "accept", 0: "reject", None: "no reward"}[reward]
            lines.append(f" deliberation {i}: {said}")
    elif isinstance(record, ThemisRecord):
        for p in record.passes:
            title = "milestones" if p.index == 0 else f"after review {p.index}"
            lines.append(f" {title} ({len(p.rounds)} selector rounds, ended: {p.stopped})")
            lines.extend(_check(c) for r in p.rounds for c in r.checks)
        for v in record.reviews:
            lines.append(f" review {v.round}: {'sound' if v.sound else f'{len(v.concerns)} concerns'}")
            lines.extend(f"  [{c.severity}] steps {', '.join(map(str, c.steps))}: {c.issue}" for c in v.concerns)
        if record.judge is not None and record.judge.missing:
            lines.append(" missing: " + "; ".join(record.judge.missing))
        window = record.judge.failure_window if record.judge is not None else None
        if window is not None and window.start >= 0:
            span = f"step {window.start}" if window.end == window.start else f"steps {window.start}-{window.end}"
            lines.append(f" failure begins at {span}" + (f": {window.reason}" if window.reason else ""))
    elif isinstance(record, LastKRecord):
        lines.append(f" frames: {'; '.join(record.frames)}")
        lines.extend(f"  sample {i}: {s.score if s.score is not None else 'failed'}: {s.reason}"
                     for i, s in enumerate(record.samples, start=1))
    elif isinstance(record, SequentialRecord):
        for c in record.checks:
            state = "skipped (repeat)" if c.skipped else {True: "satisfied", False: "not yet", None: "failed"}[c.satisfied]
            lines.append(f"  {c.frame}: {state}")
    elif isinstance(record, OtherRecord):
        lines.extend(f" {note}" for note in record.notes)
    failures = getattr(record, "failures", [])
    if failures:
        lines.append(" failed calls: " + "; ".join(f"{f.what} ({len(f.attempts)} attempts)" for f in failures))
    return lines
