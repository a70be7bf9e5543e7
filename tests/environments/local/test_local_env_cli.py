"""`agent-s3 env up/ls/screenshot/down` on real desktops, leaving nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from environments.local.host import host_records
from environments.walls.uids import uid_busy
from runner.cli.env import app

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


def test_up_ls_screenshot_down(env_base_dir: Path, tmp_path: Path, shared_desktops: list) -> None:
    base = env_base_dir / "cli"
    cli = CliRunner()
    args = ["--base-dir", str(base)]
    result = cli.invoke(app, ["up", "-n", "2", *args])
    assert result.exit_code == 0, result.output
    records = host_records(base)
    try:
        names = [d.name for r in records for d in r.desktops]
        uids = [d.uid for r in records for d in r.desktops]
        assert len(set(uids)) == 2
        assert len(names) == 2
        listing = cli.invoke(app, ["ls", *args])
        assert listing.exit_code == 0
        rows = [line.split("\t") for line in listing.output.strip().splitlines()[1:]]
        assert sorted(row[0] for row in rows) == sorted(names)
        assert all(row[4] == "ok" for row in rows), listing.output
        shot = tmp_path / "shot.png"
        taken = cli.invoke(app, ["screenshot", names[0], "-o", str(shot), *args])
        assert taken.exit_code == 0, taken.output
        assert shot.read_bytes().startswith(b"\x89PNG")
        missing = cli.invoke(app, ["screenshot", "no-such-desktop", "-o", str(shot), *args])
        assert missing.exit_code == 1 and "env ls" in missing.output
        one = cli.invoke(app, ["down", names[0], *args])
        assert one.exit_code == 0, one.output
        left = cli.invoke(app, ["ls", *args]).output
        assert names[0] not in left and names[1] in left
        everything = cli.invoke(app, ["down", "--all", *args])
        assert everything.exit_code == 0, everything.output
        assert "no desktops running" in cli.invoke(app, ["ls", *args]).output
        assert not any(uid_busy(uid) for uid in uids if uid is not None)
        assert not list((base / "desktops").iterdir())
    finally:
        cli.invoke(app, ["down", "--all", *args])
