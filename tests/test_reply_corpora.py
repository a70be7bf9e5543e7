"""Every corpus entry of every role through its real parser: read exactly as stated, or
refused as stated. A reply read as a value it does not hold (a silent misread) fails the
suite, and so does a clear reply refused; the figures per role are printed either way."""

from __future__ import annotations

from collections import Counter

import pytest

from reply_roles import ROLES, judge

#: Each role's corpus holds at least this many replies (the standard's floor).
MIN_ENTRIES = 30
KINDS = ("exact", "refused", "refused_clear", "misread")


def test_every_corpus_entry_is_read_exactly_or_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rows: list[str] = []
    wrong: list[str] = []
    small: list[str] = []
    for role in ROLES:
        entries = role.entries()
        ids = [str(e.get("id")) for e in entries]
        assert len(ids) == len(set(ids)), f"{role.name}: duplicate ids {sorted(i for i in set(ids) if ids.count(i) > 1)}"
        counts: Counter[str] = Counter()
        for entry in entries:
            outcome = judge(role, entry)
            counts[outcome.kind] += 1
            if outcome.kind in ("misread", "refused_clear"):
                wrong.append(f"{role.name}:{entry.get('id')}: {outcome.detail}")
        if len(entries) < MIN_ENTRIES:
            small.append(f"{role.name} ({len(entries)})")
        rows.append(f"{role.name:<22} {len(entries):>5} {counts['exact']:>6} {counts['refused']:>8} "
                    f"{counts['refused_clear']:>14} {counts['misread']:>7}")
    table = "\n".join([f"{'role':<22} {'size':>5} {'exact':>6} {'refused':>8} {'refused_clear':>14} {'misread':>7}",
                       *rows])
    with capsys.disabled():
        print("\nreply corpora: read exactly / refused as stated / a clear reply refused / silently misread")
        print(table)
    assert not small, f"corpora below {MIN_ENTRIES} entries: {', '.join(small)}"
    assert not wrong, f"{len(wrong)} corpus entries not read as stated:\n" + "\n".join(wrong)
