#!/usr/bin/env bash
# Installs everything agent-s3 needs on a fresh Debian machine, idempotently:
# the desktop packages (as root, only when one is missing), a virtual environment and the project.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  xvfb xauth x11-utils xdotool wmctrl openbox xterm scrot dbus-x11 fonts-dejavu-core
  mousepad pcmanfm libreoffice-calc libreoffice-writer
  libreoffice-gtk3
  python3-tk python3-uno bubblewrap slirp4netns nftables tesseract-ocr tesseract-ocr-eng xdg-utils
  at-spi2-core python3-pyatspi gir1.2-atspi-2.0 ffmpeg libglib2.0-bin gsettings-desktop-schemas gnome-terminal
  gnome-shell-common gnome-settings-daemon-common mutter-common
  # --env qemu: QEMU itself, and what builds the test image (environments/qemu/image.py)
  qemu-system-x86 qemu-utils mmdebstrap e2fsprogs
)

# install_missing WHAT PACKAGE...: installs those of the Debian packages that are missing
# (as root, or through sudo); says nothing when all are there.
install_missing() {
  local what="$1" p; shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "setup: installing $what: ${missing[*]}"
  local SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_missing "Debian packages" "${APT_PACKAGES[@]}"

# The apps OSWorld's tasks start, as Debian ships them (Chromium stands in for Chrome), only
# when asked for: AGENT_S3_OSWORLD_APPS=1 bash scripts/setup.sh (see the README for the cost).
if [ "${AGENT_S3_OSWORLD_APPS:-0}" = "1" ]; then
  install_missing "OSWorld's apps" libreoffice-impress socat gimp vlc thunderbird chromium
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat .venv/.setup-stamp 2>/dev/null)" != "$stamp" ]; then
  echo "setup: installing the project into .venv"
  .venv/bin/pip install -q -e '.[dev]'
  echo "$stamp" > .venv/.setup-stamp
fi
# The desktops' own Python packages (their `python`, as on OSWorld's image), apart from the project's.
site_stamp="$(sha256sum scripts/desktop-python.txt | cut -d' ' -f1)"
if [ "$(cat .venv/desktop-site/.setup-stamp 2>/dev/null)" != "$site_stamp" ]; then
  echo "setup: installing the desktops' Python packages into .venv/desktop-site"
  rm -rf .venv/desktop-site
  .venv/bin/pip install -q --no-warn-conflicts --target .venv/desktop-site -r scripts/desktop-python.txt
  echo "$site_stamp" > .venv/desktop-site/.setup-stamp
fi
# OSWorld's scorer, without its heavy pinned dependencies (the curated ones are the [osworld] extra).
if ! .venv/bin/python -c "import importlib.metadata as m; assert m.version('desktop-env') == '1.0.2'" 2>/dev/null; then
  echo "setup: installing OSWorld's scorer (desktop-env 1.0.2, no dependencies)"
  .venv/bin/pip install -q --no-deps desktop-env==1.0.2
fi
