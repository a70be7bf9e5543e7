"""`AndroidEnvironment` through the real adb client against simulated emulators."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from core.protocols import EnvError, EnvironmentLost
from environments.android import AdbLink, AndroidEnvironment, ConsoleError, EmulatorConsole, input_text_argvs
from testing.android import LAUNCHER, NOTES, NOTES_FILE, SETTINGS, FakeFleet

pytestmark = pytest.mark.integration


def ops(*items: dict[str, object]) -> str:
    return json.dumps(list(items))


async def test_screenshot_and_size_come_from_the_device(android_env: AndroidEnvironment) -> None:
    assert await android_env.screen_size() == (540, 960)
    png = await android_env.screenshot()
    with Image.open(io.BytesIO(png)) as img:
        assert img.size == (540, 960)
    assert android_env.sandbox() is None
    assert android_env.platform == "android"


async def test_tap_opens_an_app_and_keys_navigate(android_env: AndroidEnvironment, fleet: FakeFleet) -> None:
    device = fleet.devices[0]
    # The Notes icon sits at about (0.19, 0.2) of the screen.
    assert (await android_env.act(ops({"op": "tap", "x": 102, "y": 190}))).ok
    assert device.state.foreground == NOTES
    assert await android_env.cursor_position() == (102, 190)
    assert (await android_env.act(ops({"op": "key", "key": "home"}))).ok
    assert device.state.foreground == LAUNCHER
    assert (await android_env.act(ops({"op": "open", "app": "Settings"}))).ok
    assert device.state.foreground == SETTINGS
    assert (await android_env.act(ops({"op": "key", "key": "back"}))).ok
    assert device.state.foreground == LAUNCHER
    assert (await android_env.act(ops({"op": "open", "app": "com.example.notes"}))).ok
    assert device.state.foreground == NOTES


@pytest.mark.parametrize(
    "text",
    [
        "buy oat milk",
        'it\'s "quoted" & $(rm -rf /) `x`; echo hi | cat > /sdcard/pwned',
        "100%s literal %s and 50% sure",
        "back\\slash * ? ~ # ! {a,b} [x]",
        "  two  spaces  ",
        "long " * 90 + "%s end",
    ],
)
async def test_typed_text_arrives_exactly(
    android_env: AndroidEnvironment, fleet: FakeFleet, text: str
) -> None:
    device = fleet.devices[0]
    device.start(NOTES)
    result = await android_env.act(ops({"op": "tap", "x": 270, "y": 170}, {"op": "text", "text": text}))
    assert result.ok, result.stderr
    assert device.state.draft == text
    assert "/sdcard/pwned" not in device.state.files


def test_text_escaping_never_leaves_a_bare_percent_s() -> None:
    argvs = input_text_argvs("a%sb c\nd")
    assert argvs == [
        ["input", "text", "a%"],
        ["input", "text", "sb%sc"],
        ["input", "keyevent", "KEYCODE_ENTER"],
        ["input", "text", "d"],
    ]


async def test_enter_saves_and_long_press_deletes_a_note(
    android_env: AndroidEnvironment, fleet: FakeFleet
) -> None:
    device = fleet.devices[0]
    device.start(NOTES)
    for word in ("first", "second"):
        r = await android_env.act(
            ops(
                {"op": "tap", "x": 270, "y": 170}, {"op": "text", "text": word}, {"op": "key", "key": "enter"}
            )
        )
        assert r.ok, r.stderr
    assert device.state.files[NOTES_FILE] == b"first\nsecond\n"
    # Rows start at 0.32 of the height, 0.06 tall: the first note is around y = 336.
    assert (await android_env.act(ops({"op": "long_press", "x": 200, "y": 336}))).ok
    assert device.state.notes == ["second"]
    swipe = ops({"op": "swipe", "x1": 270, "y1": 700, "x2": 270, "y2": 300, "ms": 300})
    assert (await android_env.act(swipe)).ok
    assert device.events[-1] == ("swipe", (270.0, 700.0, 270.0, 300.0, 300))


async def test_clear_empties_the_focused_field(android_env: AndroidEnvironment, fleet: FakeFleet) -> None:
    device = fleet.devices[0]
    device.start(NOTES)
    steps = ops(
        {"op": "tap", "x": 270, "y": 170},
        {"op": "text", "text": "old text"},
        {"op": "clear"},
        {"op": "text", "text": "new"},
    )
    assert (await android_env.act(steps)).ok
    assert device.state.draft == "new"


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("import os; os.system('reboot')", "JSON"),
        ("[]", "non-empty"),
        (ops({"op": "tap", "x": -1, "y": 3}), "x"),
        (ops({"op": "shell", "cmd": "reboot"}), "op"),
        (ops({"op": "key", "key": "ctrl"}), "unknown key"),
        (ops({"op": "text", "text": "héllo"}), "ASCII"),
        (ops({"op": "open", "app": "Nonexistent Game"}), "no installed app"),
        (ops({"op": "unsupported", "reason": "a phone has no key combinations"}), "key combinations"),
    ],
)
async def test_bad_ops_are_error_results_not_exceptions(
    android_env: AndroidEnvironment, fleet: FakeFleet, code: str, problem: str
) -> None:
    before = len(fleet.devices[0].events)
    result = await android_env.act(code)
    assert result.status == "error" and problem in result.stderr
    assert len(fleet.devices[0].events) == before


async def test_revert_loads_the_start_snapshot(android_env: AndroidEnvironment, fleet: FakeFleet) -> None:
    device = fleet.devices[0]
    await android_env.act(ops({"op": "open", "app": "Settings"}, {"op": "tap", "x": 200, "y": 177}))
    assert device.state.settings["global"]["airplane_mode_on"] == "1"
    await android_env.revert()
    assert device.state.foreground == LAUNCHER
    assert device.state.settings["global"]["airplane_mode_on"] == "0"
    assert "avd snapshot load agent_s3_start" in fleet.consoles[0].commands
    await android_env.save_snapshot("other")
    await android_env.act(ops({"op": "open", "app": "Notes"}))
    await android_env.revert_to("other")
    assert device.state.foreground == LAUNCHER
    with pytest.raises(ConsoleError, match="does not exist"):
        await android_env.revert_to("never-saved")


async def test_physical_device_cannot_revert(fleet: FakeFleet) -> None:
    env = AndroidEnvironment(AdbLink(fleet.serials[0], port=fleet.server.port), console=None, settle=0)
    with pytest.raises(EnvError, match="physical device: emulator snapshots are not available"):
        await env.revert()


async def test_wrong_console_token_is_one_clear_error(fleet: FakeFleet) -> None:
    bad = fleet.token_path.with_name("bad-token")
    bad.write_text("nope")
    console = EmulatorConsole(fleet.consoles[0].port, token_path=bad)
    with pytest.raises(ConsoleError, match="authentication token does not match"):
        await console.snapshot_load("agent_s3_start")


async def test_a_vanished_device_or_server_is_environment_lost(
    android_env: AndroidEnvironment, fleet: FakeFleet
) -> None:
    fleet.devices[0].online = False
    with pytest.raises(EnvironmentLost, match="offline"):
        await android_env.screenshot()
    fleet.devices[0].online = True
    assert (await android_env.act(ops({"op": "key", "key": "home"}))).ok
    fleet.server.stop()
    with pytest.raises(EnvironmentLost, match="no adb server"):
        await android_env.act(ops({"op": "key", "key": "home"}))


async def test_closed_environment_refuses_work(android_env: AndroidEnvironment) -> None:
    await android_env.close()
    await android_env.close()
    with pytest.raises(EnvironmentLost, match="closed"):
        await android_env.screenshot()


async def test_touches_are_marked_only_when_asked(android_env: AndroidEnvironment, fleet: FakeFleet) -> None:
    await android_env.act(ops({"op": "tap", "x": 500, "y": 900}))
    plain = await android_env.screenshot()
    android_env.mark_touches = True
    marked = await android_env.screenshot()
    with Image.open(io.BytesIO(plain)) as a, Image.open(io.BytesIO(marked)) as b:
        assert a.convert("RGB").getpixel((500, 900)) != b.convert("RGB").getpixel((500, 900))
        assert a.convert("RGB").getpixel((20, 500)) == b.convert("RGB").getpixel((20, 500))


async def test_a_hung_command_times_out_without_losing_the_device(android_env: AndroidEnvironment) -> None:
    result = await android_env.link.shell("sleep 2", timeout=0.3)
    assert result.status == "timeout"
    assert (await android_env.link.shell("echo alive")).stdout == "alive\n"
