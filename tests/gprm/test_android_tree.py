"""GUI-PRA's element tree on Android through the real adb client, against the simulated
emulators: they implement no `uiautomator`, so the guide's parser says so and the OCR
parser answers (announced once), never a silent empty list."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.android import AdbLink, AndroidEnvironment, console_port_of
from gprm import uiparser
from gprm.uiparser import make_parser
from runner.guided import tree_source
from testing.android import fake_fleet

pytestmark = pytest.mark.integration


@pytest.fixture
def phone(tmp_path: Path) -> Iterator[AndroidEnvironment]:
    with fake_fleet(1, tmp_path, screen=(540, 960)) as fleet:
        serial = fleet.serials[0]
        assert console_port_of(serial) is not None
        yield AndroidEnvironment(AdbLink(serial, port=fleet.server.port, timeout=10), settle=0)


async def test_a_phone_without_uiautomator_falls_back_loudly(phone: AndroidEnvironment,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    fetch = tree_source(phone)
    assert fetch is not None
    with pytest.raises(RuntimeError, match="uiautomator gave no hierarchy"):
        await fetch()
    uiparser._ANNOUNCED.clear()
    parser = make_parser("tree", tree=fetch, ocr="tesseract")
    with caplog.at_level(logging.WARNING, logger="gprm"):
        parsed = await parser.parse(await phone.screenshot())
    assert parsed.backend.startswith("local:") and "uiautomator gave no hierarchy" in parsed.note
    assert any("answers instead" in r.getMessage() for r in caplog.records)
