"""The application settings every snapshot's home starts from.

Written as plain files so a home is a folder that can be copied: GLib's keyfile settings
backend (instead of dconf) for mousepad and GTK, a LibreOffice profile whose first-run,
tip-of-the-day and "keep format?" prompts are already answered, and quiet file-manager and
terminal defaults. Nothing here asks the user a question on first start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BASE_DIRS", "BASE_FILES", "openbox_config", "terminal_command", "write_libreoffice_profile"]

BASE_DIRS = ("Desktop", "Documents", "Downloads", ".cache", ".local/share")

_MOUSEPAD = """\
[org/xfce/mousepad/preferences/file]
session-restore='never'
make-backup=false
monitor-changes=true
auto-reload=true
add-last-end-of-line=true

[org/xfce/mousepad/preferences/window]
remember-size=false
remember-position=false
remember-state=false
client-side-decorations=false
path-in-title=true

[org/xfce/mousepad/preferences/view]
use-default-monospace-font=true
"""

_GTK3 = """\
[Settings]
gtk-theme-name=Adwaita
gtk-enable-animations=false
gtk-recent-files-enabled=false
gtk-cursor-blink=false
"""

_PCMANFM = """\
[config]
bm_open_method=0

[volume]
mount_on_startup=0
mount_removable=0
autorun=0

[ui]
always_show_tabs=0
show_statusbar=1
"""

_LIBFM = """\
[config]
single_click=0
confirm_del=0
confirm_trash=0
quick_exec=1
terminal=xterm -e %s
"""

_XRESOURCES = """\
XTerm*faceName: DejaVu Sans Mono
XTerm*faceSize: 12
XTerm*saveLines: 2000
XTerm*termName: xterm-256color
"""

# xdg-open on a bare openbox session reads only these defaults (else it picks LibreOffice
# Writer for plain text): text in mousepad, spreadsheets and documents in LibreOffice.
_MIMEAPPS = """\
[Default Applications]
text/plain=org.xfce.mousepad.desktop
application/vnd.openxmlformats-officedocument.spreadsheetml.sheet=libreoffice-calc.desktop
application/vnd.ms-excel=libreoffice-calc.desktop
application/vnd.oasis.opendocument.spreadsheet=libreoffice-calc.desktop
text/csv=libreoffice-calc.desktop
application/vnd.openxmlformats-officedocument.wordprocessingml.document=libreoffice-writer.desktop
application/msword=libreoffice-writer.desktop
application/vnd.oasis.opendocument.text=libreoffice-writer.desktop
"""

# VLC as OSWorld's image has it: its web interface on (port 8080, password "password"), which
# OSWorld's vlc_playing_info getter reads, and no first-start privacy question.
_VLCRC = """\
[qt]
qt-privacy-ask=0

[core]
extraintf=http

[lua]
http-password=password
"""

BASE_FILES: dict[str, str] = {
    ".config/glib-2.0/settings/keyfile": _MOUSEPAD,
    ".config/gtk-3.0/settings.ini": _GTK3,
    ".config/pcmanfm/default/pcmanfm.conf": _PCMANFM,
    ".config/libfm/libfm.conf": _LIBFM,
    ".config/mimeapps.list": _MIMEAPPS,
    ".config/vlc/vlcrc": _VLCRC,
    ".Xresources": _XRESOURCES,
    ".bashrc": "PS1='\\u@desktop:\\w\\$ '\n",
}

_LO_SETTINGS = {
    ("/org.openoffice.Setup/Office", "FirstStartWizardCompleted"): ("boolean", "true"),
    ("/org.openoffice.Office.Common/Misc", "FirstRun"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Misc", "UseSystemFileDialog"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "AutoSave"): ("boolean", "false"),
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled"): ("boolean", "false"),
    ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Misc", "CollectUsageInformation"): ("boolean", "false"),
    ("/org.openoffice.Office.Common/Help/StartCenter", "ShowNewVersionInfobar"): ("boolean", "false"),
}


_OPENBOX_APPS = """<applications>
  <application type="normal"><maximized>yes</maximized><decor>yes</decor></application>
</applications>"""


def terminal_command() -> str:
    """What Ctrl+Alt+T starts: GNOME Terminal as on OSWorld's Ubuntu image (its /terminal
    reads that terminal's text), else xterm titled "Terminal" (the title OSWorld's tasks
    activate)."""
    return "gnome-terminal" if shutil.which("gnome-terminal") else "xterm -T Terminal"


def openbox_config(system_rc: Path = Path("/etc/xdg/openbox/rc.xml")) -> str:
    """The system openbox configuration with normal windows opening maximized and Ubuntu's
    Ctrl+Alt+T for a terminal.

    Agents see apps the way OSWorld's desktops show them (full screen), small default window
    sizes never hide the controls a task needs, and the terminal OSWorld's `os` tasks open
    with Ctrl+Alt+T in their setup opens here too.
    """
    text = system_rc.read_text()
    start, end = text.find("<applications>"), text.find("</applications>")
    if start >= 0 and end >= 0:
        text = text[:start] + _OPENBOX_APPS + text[end + len("</applications>") :]
    keyboard = text.find("<keyboard>")
    if keyboard >= 0:
        binding = (
            '\n  <keybind key="C-A-t"><action name="Execute">'
            f"<command>{terminal_command()}</command></action></keybind>"
        )
        at = keyboard + len("<keyboard>")
        text = text[:at] + binding + text[at:]
    return text


def _libreoffice_version(soffice: str) -> str | None:
    """ "major.minor" of the installed LibreOffice: what its "what's new" bar compares."""
    try:
        out = subprocess.run([soffice, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(\d+)\.(\d+)\.\d+", out)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _xcu_items(version: str | None) -> str:
    settings = dict(_LO_SETTINGS)
    if version is not None:
        settings[("/org.openoffice.Setup/Product", "ooSetupLastVersion")] = ("string", version)
    lines = []
    for (path, name), (kind, value) in settings.items():
        lines.append(
            f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse" oor:type="xs:{kind}">'
            f"<value>{value}</value></prop></item>"
        )
    return "\n".join(lines)


def write_libreoffice_profile(home: Path) -> None:
    """Put a ready LibreOffice profile at LibreOffice's default place under ``home``.

    The profile is initialised once by LibreOffice itself (when installed) so first starts
    in a desktop skip profile creation, then our answers to its prompts are merged in.
    """
    target = home / ".config/libreoffice/4"
    target.parent.mkdir(parents=True, exist_ok=True)
    soffice = shutil.which("soffice")
    version = _libreoffice_version(soffice) if soffice is not None else None
    if soffice is not None:
        with tempfile.TemporaryDirectory(prefix="lo-profile-") as tmp:
            profile = Path(tmp) / "profile"
            subprocess.run(
                [
                    soffice,
                    "--headless",
                    "--terminate_after_init",
                    f"-env:UserInstallation={profile.as_uri()}",
                ],
                env={"HOME": tmp, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
            if (profile / "user").is_dir():
                shutil.copytree(profile, target, dirs_exist_ok=True)
    xcu = target / "user/registrymodifications.xcu"
    xcu.parent.mkdir(parents=True, exist_ok=True)
    header = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
    )
    body = ""
    if xcu.exists():
        text = xcu.read_text()
        start = text.find(">", text.find("<oor:items")) + 1
        end = text.rfind("</oor:items>")
        if start > 0 and end > start:
            body = text[start:end].strip("\n") + "\n"
    xcu.write_text(header + body + _xcu_items(version) + "\n</oor:items>\n")
