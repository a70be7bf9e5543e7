"""Every role's reply corpus through its parser, per role: size, read exactly, refused as the
entry states, a clear reply refused (a billed re-ask), silently misread (a wrong value used).

    python benchmarks/reply_corpora.py                    # this tree's parsers
    python benchmarks/reply_corpora.py --baseline main    # and, side by side, REF's parsers

The corpora are tests/*/corpus/*.yaml, read through tests/reply_roles.py. With --baseline the
same corpora run through the parsers of a git REF (its ``src`` exported to a temporary folder
and imported first in a child process). Three readers call parsers under their older names
when the new ones are absent (`read_facts`/`read_items` were `parse_facts`/`parse_items`,
returning None; `read_point` took no `convention`, so a y-first model's reply was read x
first): the figures are what that REF's code did with each reply.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("exact", "refused", "refused_clear", "misread", "misread_due")


def _legacy_readers(roles: list[Any]) -> list[Any]:
    """The roles with readers that fall back to the parser names of older trees."""
    import dataclasses

    import reply_roles as rr

    def facts(entry: dict[str, Any]) -> Any:
        try:
            return rr._facts(entry)
        except ImportError:
            from bjudge.parsing import parse_facts  # type: ignore[attr-defined]
            found = parse_facts(entry["reply"])
            if found is None:
                raise rr.Refused("it has no <facts>...</facts> section") from None
            return found

    def key_points(entry: dict[str, Any]) -> Any:
        try:
            return rr._key_points(entry)
        except ImportError:
            from bjudge.parsing import parse_items  # type: ignore[attr-defined]
            found = parse_items(entry["reply"], "key_points")
            if found is None:  # the old WebJudge also refused an empty list, as the new one does
                raise rr.Refused("it has no <key_points>...</key_points> section") from None
            return found

    def grounding(entry: dict[str, Any]) -> Any:
        from agent_s3.point_reply import PointReplyError, read_point

        space = (float(entry["space"][0]), float(entry["space"][1]))
        try:
            try:
                x, y = read_point(entry["reply"], space, convention=entry.get("convention", "xy"))
            except TypeError:
                x, y = read_point(entry["reply"], space)
        except PointReplyError as exc:
            raise rr.Refused(str(exc)) from None
        return [x, y]

    swap = {"bjudge.narrator": facts, "bjudge.key_points": key_points, "agent_s3.grounding": grounding}
    return [dataclasses.replace(r, read=swap[r.name]) if r.name in swap else r for r in roles]


def measure(legacy: bool) -> dict[str, dict[str, int]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from reply_roles import ROLES, judge

    roles = _legacy_readers(ROLES) if legacy else ROLES
    out: dict[str, dict[str, int]] = {}
    for role in roles:
        counts: Counter[str] = Counter()
        entries = role.entries()
        for entry in entries:
            try:
                outcome = judge(role, entry)
            except Exception:  # an old parser that crashes on a reply misreads it as a failure of its caller
                counts["misread"] += 1
                continue
            counts[outcome.kind] += 1
            if outcome.kind == "misread" and "where a refusal was due" in outcome.detail:
                counts["misread_due"] += 1
        out[role.name] = {"size": len(entries), **{k: counts[k] for k in KINDS}}
    return out


def baseline(ref: str) -> dict[str, dict[str, int]]:
    """`measure(legacy=True)` with REF's src imported first, in a child process."""
    with tempfile.TemporaryDirectory(prefix="reply-corpora-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "src"],
                                 capture_output=True, check=True).stdout
        tar_path = Path(tmp) / "src.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, __file__, "--json", "--legacy"], env=env, capture_output=True,
                              text=True, check=True)
        return json.loads(done.stdout)


def table(now: dict[str, dict[str, int]], before: dict[str, dict[str, int]] | None, ref: str) -> str:
    head = f"{'role':<22} {'size':>5} {'exact':>6} {'refused':>8} {'clear refused':>14} {'misread':>8}"
    if before is not None:
        head += f"   | {ref}: {'exact':>6} {'refused':>8} {'clear refused':>14} {'misread':>8} {'(for a refusal)':>16}"
    lines = [head]
    totals: Counter[str] = Counter()
    old_totals: Counter[str] = Counter()
    for name, row in now.items():
        totals.update(row)
        line = (f"{name:<22} {row['size']:>5} {row['exact']:>6} {row['refused']:>8} {row['refused_clear']:>14} "
                f"{row['misread']:>8}")
        if before is not None:
            old = before.get(name, {k: 0 for k in KINDS})
            old_totals.update(old)
            line += (f"   | {' ' * len(ref)}  {old['exact']:>6} {old['refused']:>8} {old['refused_clear']:>14} "
                     f"{old['misread']:>8} {old['misread_due']:>16}")
        lines.append(line)
    line = (f"{'all roles':<22} {totals['size']:>5} {totals['exact']:>6} {totals['refused']:>8} "
            f"{totals['refused_clear']:>14} {totals['misread']:>8}")
    if before is not None:
        line += (f"   | {' ' * len(ref)}  {old_totals['exact']:>6} {old_totals['refused']:>8} "
                 f"{old_totals['refused_clear']:>14} {old_totals['misread']:>8} {old_totals['misread_due']:>16}")
    lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REF", help="also run the corpora through REF's parsers")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--legacy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.legacy:
        sys.path.insert(0, str(ROOT / "src"))
    now = measure(args.legacy)
    if args.json:
        print(json.dumps(now))
        return
    before = baseline(args.baseline) if args.baseline else None
    print("exact: read as the entry states; refused: refused as it states; clear refused: a reply with a stated "
          "reading refused (a billed re-ask); misread: a value other than the stated one (silent), of which "
          "'for a refusal': a value read where the entry states a refusal (an ambiguous, cut or off-contract reply)")
    print(table(now, before, args.baseline or ""))


if __name__ == "__main__":
    main()
