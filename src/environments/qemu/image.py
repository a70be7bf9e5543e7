"""A small VM image built from Debian's packages, whose in-VM server speaks OSWorld's protocol.

OSWorld's own image (Ubuntu, GNOME, its apps, its Flask server on port 5000) is tens of
gigabytes and cannot be fetched here, so the QEMU provider is tested on this one: Debian's
kernel, Xvfb with a small window manager, xterm, and this project's controller server run
as OSWorld's is (user ``user``, password ``password``, sudo with that password, no token,
port 5000, platform ubuntu). A tiny init (tini, then `BOOT_SCRIPT`) starts them; the guest
has no network service of its own and reaches nothing unless the VM is given the NAT.

Built in two cached steps, each keyed by a hash of what goes into it: the Debian tree
(`mmdebstrap` into a folder, pruned: no kernel modules past the initramfs, no GL drivers,
no documentation) and the image (the tree plus the server, its Python packages copied from
this interpreter's environment and compiled, made into ext4 with ``mke2fs -d`` and then
qcow2). The kernel boots directly (``-kernel``/``-initrd``), described by the image's
``.boot.json`` sidecar. Needs root, ``mmdebstrap``, ``e2fsprogs`` and ``qemu-utils``.

``python -m environments.qemu.image [--cache DIR]`` builds (or finds) it and prints where.
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

__all__ = ["BOOT_SCRIPT", "PACKAGES", "BuiltImage", "boot_manifest", "default_cache", "ensure_test_image"]

#: Debian packages of the guest (bookworm, no recommends).
PACKAGES = (
    "linux-image-amd64", "python3", "python-is-python3", "xvfb", "xauth", "xfonts-base", "xterm",
    "xdotool", "wmctrl", "matchbox-window-manager", "iproute2", "sudo", "tini", "procps",
    "python3-tk",  # pyautogui imports mouseinfo, which needs tkinter on Linux
    # the screen grabber (mss) loads these by name
    "libxcb-render0", "libxcb-shm0", "libxcb-xfixes0", "libxcb-randr0", "libxfixes3", "libxrandr2",
)  # fmt: skip
#: Python distributions the server imports (their requirements come along).
GUEST_DISTRIBUTIONS = ("aiohttp", "isal", "mss", "python3-xlib", "numpy", "pillow", "pyautogui")
#: The project's package the guest runs (with every project module it imports).
GUEST_SERVER = "environments/server"
#: Guest modules the initramfs loads (the root disk, its file system, the network card).
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "ext4")
#: Free space left in the guest's file system for what tasks write.
FREE_MIB = 768
#: The in-VM server's port, as on OSWorld's image.
SERVER_PORT = 5000
#: What a run on this image is labelled with: it is not OSWorld's image.
NOTE = "not leaderboard-comparable (agent-s3's Debian test image under QEMU, not OSWorld's Ubuntu image)"
#: Printed on the guest's serial console once its server answers.
READY_MARK = "agent-s3: guest ready"
_RECIPE = 1

#: PID 1 runs this (through tini, which reaps orphans): mounts, loopback and the NIC as
#: QEMU's user-mode network expects (10.0.2.15, gateway 10.0.2.2, DNS 10.0.2.3), then the
#: desktop and the server as ``user``.
BOOT_SCRIPT = f"""#!/bin/bash
set -u
exec </dev/null >/dev/ttyS0 2>&1
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp; mount -t tmpfs -o mode=755 tmpfs /run
hostname agent-s3-vm
ip link set lo up
if ip link set eth0 up; then
  ip addr add 10.0.2.15/24 dev eth0; ip route add default via 10.0.2.2
fi
echo "nameserver 10.0.2.3" > /run/resolv.conf
mkdir -p /tmp/.X11-unix /run/user/1000; chmod 1777 /tmp/.X11-unix; chown user:user /run/user/1000
echo "agent-s3: guest init $(cut -d' ' -f1 /proc/uptime)"
export HOME=/home/user USER=user LOGNAME=user SHELL=/bin/bash DISPLAY=:0 XDG_RUNTIME_DIR=/run/user/1000
export PYTHONPATH=/opt/agent-s3/src:/opt/agent-s3/lib PYTHONDONTWRITEBYTECODE=1
cd /home/user
runuser -u user -- Xvfb :0 -screen 0 1920x1080x24 -nolisten tcp -extension GLX &
for _ in $(seq 300); do [ -S /tmp/.X11-unix/X0 ] && break; sleep 0.1; done
echo "agent-s3: X up $(cut -d' ' -f1 /proc/uptime)"
runuser -u user -- matchbox-window-manager -use_titlebar no &
runuser -u user -- python3 -m environments.server --host 0.0.0.0 --port {SERVER_PORT} --no-auth --allow-public &
for _ in $(seq 1200); do
  grep -q ":$(printf '%04X' {SERVER_PORT}) 00000000:0000 0A" /proc/net/tcp && break
  sleep 0.2
done
echo "{READY_MARK} $(cut -d' ' -f1 /proc/uptime)"
wait
"""

_INIT = "#!/bin/sh\nexec /usr/bin/tini -s -- /sbin/agent-s3-boot\n"
_APPEND = ("root=/dev/vda rw console=ttyS0 quiet loglevel=3 init=/sbin/agent-s3-init net.ifnames=0 "
           "mitigations=off random.trust_cpu=on tsc=reliable")


@dataclass(frozen=True, slots=True)
class BuiltImage:
    """A built image: the qcow2 (read-only), its boot sidecar, and what building it cost."""

    path: Path
    size_bytes: int
    """The qcow2 file's size on disk."""
    base_seconds: float
    """Wall time of building the Debian tree (mmdebstrap: downloads, unpacking, the initramfs)."""
    assemble_seconds: float
    """Wall time of adding the server and making the disk image."""
    recipe: str

    @property
    def build_seconds(self) -> float:
        return self.base_seconds + self.assemble_seconds


def default_cache() -> Path:
    """``$AGENT_S3_CACHE``, else ``~/.cache/agent-s3``, plus ``qemu``."""
    root = os.environ.get("AGENT_S3_CACHE") or str(Path.home() / ".cache" / "agent-s3")
    return Path(root) / "qemu"


def boot_manifest(image: Path) -> dict[str, str] | None:
    """The direct-boot sidecar of `image` (``<image>.boot.json``: kernel, initrd, append, with
    paths relative to it), or None for an image that boots through its own firmware."""
    sidecar = image.with_name(image.name + ".boot.json")
    if not sidecar.is_file():
        return None
    data = json.loads(sidecar.read_text())
    out = {"append": str(data.get("append", ""))}
    for key in ("kernel", "initrd"):
        if data.get(key):
            out[key] = str((sidecar.parent / data[key]).resolve())
    return out


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _project_root() -> Path:
    return Path(__file__).resolve().parents[2]  # src/


def _project_files() -> list[Path]:
    """The server's package and every project module it imports, with their packages'
    ``__init__`` files (found by reading the imports, so a new import comes along)."""
    root = _project_root()
    pending = [p for p in sorted((root / GUEST_SERVER).rglob("*.py"))]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        package = path.parent
        while package != root:
            pending.append(package / "__init__.py")
            package = package.parent
        for module in _imports(path, root):
            base = root / Path(*module.split("."))
            pending += [base.with_suffix(".py"), base / "__init__.py"]
    return sorted(seen)


def _imports(path: Path, root: Path) -> set[str]:
    """Project modules `path` imports (absolute ``core.``/``environments.`` and relative)."""
    found: set[str] = set()
    here = path.relative_to(root).with_suffix("").parts
    package = here[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join((*package[: len(package) - node.level + 1], *([base] if base else [])))
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] in ("core", "environments")}
    return found


def _distributions() -> list[metadata.Distribution]:
    """The guest's Python distributions with their requirements, found in this environment."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    pending = list(GUEST_DISTRIBUTIONS)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise EnvError(f"the guest needs the Python package {name}; install the project first") from None
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append(req.name)
    return sorted(seen.values(), key=lambda d: str(d.metadata["Name"]).lower())


def base_recipe() -> str:
    return _digest(str(_RECIPE), *PACKAGES, *INITRAMFS_MODULES)


def image_recipe() -> str:
    dists = [f"{d.metadata['Name']}=={d.version}" for d in _distributions()]
    sources = [p.read_bytes() for p in _project_files()]
    return _digest(base_recipe(), Path(__file__).read_bytes(), *dists, *sources)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # one build per machine at a time
        yield


def _run(argv: list[str], log: Path, **kw: object) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise EnvError(f"building the test image failed at {argv[0]} (exit {done.returncode}): "
                       f"{' | '.join(tail)} (log: {log})")


def _apt_sources() -> bytes:
    """This machine's own apt sources, so the guest comes from the mirror the host uses."""
    found = [p for p in (Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*")))
             if p.is_file() and p.suffix in (".list", ".sources")]
    texts = [p.read_text() for p in found if "debian" in p.read_text()]
    if not texts:
        raise EnvError("no Debian apt source on this machine to build the test image from")
    deb822 = [t for t in texts if "Types:" in t]
    return ("\n\n".join(deb822) if deb822 else "\n".join(texts)).encode()


def _build_base(dest: Path, log: Path) -> None:
    """The pruned Debian tree at `dest` (built beside it, then renamed)."""
    for tool in ("mmdebstrap",):
        if shutil.which(tool) is None:
            raise EnvError(f"building the test image needs {tool}: apt-get install {tool} (scripts/setup.sh does)")
    work = dest.with_name(dest.name + ".part")
    shutil.rmtree(work, ignore_errors=True)
    modules = "\\n".join(INITRAMFS_MODULES)
    argv = [
        "mmdebstrap", "--variant=minbase", "--mode=root", "--skip=check/empty",
        "--include=" + ",".join(PACKAGES),
        "--aptopt=APT::Install-Recommends \"false\"",
        "--dpkgopt=force-unsafe-io",
        *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "doc", "locale", "info")),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        # a small initramfs from the start (the kernel's own hook would pack every module)
        "--essential-hook=mkdir -p \"$1/etc/initramfs-tools/conf.d\"; "
        "echo MODULES=list > \"$1/etc/initramfs-tools/conf.d/agent-s3.conf\"",
        f"--customize-hook=printf '{modules}\\n' > \"$1/etc/initramfs-tools/modules\"; "
        "chroot \"$1\" update-initramfs -u -k all",
        "bookworm", str(work), "-",
    ]  # fmt: skip
    _run(argv, log, input=_apt_sources())
    _prune(work)
    work.rename(dest)


def _prune(root: Path) -> None:
    """Drop what the guest never loads: kernel modules (the initramfs has its own), GL
    drivers (Xvfb runs without GLX), documentation and apt's caches."""
    boot = root / "boot"
    out = root / "agent-s3-boot"
    out.mkdir()
    for kernel in boot.glob("vmlinuz-*"):
        shutil.copy2(kernel, out / "vmlinuz")
    for initrd in boot.glob("initrd.img-*"):
        shutil.copy2(initrd, out / "initrd.img")
    for child in boot.iterdir():
        child.unlink() if child.is_file() or child.is_symlink() else shutil.rmtree(child)
    for version in (root / "usr/lib/modules").iterdir():
        shutil.rmtree(version / "kernel", ignore_errors=True)
    lib = root / "usr/lib/x86_64-linux-gnu"
    shutil.rmtree(lib / "dri", ignore_errors=True)
    for pattern in ("libLLVM-*.so*", "libz3.so*"):
        for f in lib.glob(pattern):
            f.unlink()
    for folder in ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir(parents=True, exist_ok=True)


def _install_guest_files(root: Path, log: Path) -> None:
    """The account, the init, the server and its Python packages."""
    chroot = ["chroot", str(root)]
    _run([*chroot, "useradd", "-m", "-u", "1000", "-s", "/bin/bash", "user"], log)
    _run([*chroot, "chpasswd"], log, input=b"user:password\n")
    (root / "etc/sudoers.d/user").write_text("user ALL=(ALL:ALL) ALL\n")
    os.chmod(root / "etc/sudoers.d/user", 0o440)
    home = root / "home/user"
    # a prompt that leaves a terminal's title alone (tasks find their terminal by its -T title)
    (home / ".bashrc").write_text("PS1='\\u@\\h:\\w\\$ '\n")
    os.chown(home / ".bashrc", 1000, 1000)
    for folder in ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos"):
        (home / folder).mkdir(exist_ok=True)
        os.chown(home / folder, 1000, 1000)
    (root / "etc/hostname").write_text("agent-s3-vm\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 agent-s3-vm\n")
    resolv = root / "etc/resolv.conf"
    if resolv.exists() or resolv.is_symlink():
        resolv.unlink()
    resolv.symlink_to("/run/resolv.conf")
    for name, text in (("agent-s3-boot", BOOT_SCRIPT), ("agent-s3-init", _INIT)):
        (root / "sbin" / name).write_text(text)
        os.chmod(root / "sbin" / name, 0o755)
    src, lib = root / "opt/agent-s3/src", root / "opt/agent-s3/lib"
    for path in _project_files():
        target = src / path.relative_to(_project_root())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    for dist in _distributions():
        for file in dist.files or []:
            if "__pycache__" in file.parts or str(file).startswith(".."):
                continue
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                target = lib / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    _run([*chroot, "python3", "-m", "compileall", "-q", "-j", "0", "/opt/agent-s3"], log)


def _make_disk(root: Path, image: Path, log: Path) -> None:
    used = int(subprocess.run(["du", "-s", "--block-size=1M", str(root)], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    raw = image.with_suffix(".raw")
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "agent-s3", "-m", "0", "-d", str(root), str(raw),
          f"{used + FREE_MIB + used // 5}M"], log)
    _run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(image)], log)
    raw.unlink()


def ensure_test_image(cache: Path | None = None, *, say: Callable[[str], None] | None = None) -> BuiltImage:
    """The test image, built once per machine (and again only when its recipe changes)."""
    cache = cache or default_cache()
    recipe = image_recipe()
    folder = cache / f"image-{recipe}"
    image = folder / "agent-s3-test.qcow2"
    with _locked(cache / "build.lock"):
        if not (folder / "build.json").is_file():
            base = cache / f"base-{base_recipe()}"
            work = folder.with_name(folder.name + ".part")
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            log = work / "build.log"
            if not base.is_dir():
                if say:
                    say("building the QEMU test image's Debian tree (once per machine, a few minutes)")
                started = time.monotonic()
                _build_base(base, log)
                base.with_suffix(".json").write_text(json.dumps({"seconds": round(time.monotonic() - started, 1)}))
            if say:
                say("assembling the QEMU test image")
            started = time.monotonic()
            root = work / "root"
            _run(["cp", "-a", "--reflink=auto", str(base), str(root)], log)
            _install_guest_files(root, log)
            for name in ("vmlinuz", "initrd.img"):
                shutil.move(root / "agent-s3-boot" / name, work / name)
            shutil.rmtree(root / "agent-s3-boot")
            _make_disk(root, work / image.name, log)
            shutil.rmtree(root)
            for name in ("vmlinuz", "initrd.img"):
                os.chmod(work / name, 0o444)  # QEMU (an unprivileged uid) reads them through a descriptor
            (work / (image.name + ".boot.json")).write_text(json.dumps(
                {"kernel": "vmlinuz", "initrd": "initrd.img", "append": _APPEND, "note": NOTE}, indent=1))
            os.chmod(work / image.name, 0o444)
            try:
                base_seconds = float(json.loads(base.with_suffix(".json").read_text())["seconds"])
            except (OSError, ValueError, KeyError):
                base_seconds = 0.0
            (work / "build.json").write_text(json.dumps({
                "recipe": recipe, "base_seconds": base_seconds,
                "assemble_seconds": round(time.monotonic() - started, 1),
                "bytes": (work / image.name).stat().st_size}))
            shutil.rmtree(folder, ignore_errors=True)
            work.rename(folder)
            _prune_cache(cache, keep={folder.name, base.name})
    built = json.loads((folder / "build.json").read_text())
    return BuiltImage(path=image, size_bytes=int(built["bytes"]), base_seconds=float(built["base_seconds"]),
                     assemble_seconds=float(built["assemble_seconds"]), recipe=recipe)


def _prune_cache(cache: Path, keep: set[str]) -> None:
    """Drop images and trees of older recipes, and the boot snapshots made of them."""
    for old in [*cache.glob("image-*"), *cache.glob("base-*")]:
        if old.name not in keep and old.name.split(".")[0] not in keep:
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
    for snapshot in (cache / "snapshots").glob("boot-*"):
        try:
            layers = json.loads((snapshot / "snapshot.json").read_text())["layers"]
        except (OSError, ValueError, KeyError):
            continue
        if any(str(cache) in layer["path"] and not Path(layer["path"]).exists() for layer in layers):
            shutil.rmtree(snapshot, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.qemu.image",
                                     description="Build (or find) the QEMU test image.")
    parser.add_argument("--cache", type=Path, default=None, help="cache folder (default ~/.cache/agent-s3/qemu)")
    args = parser.parse_args(argv)
    try:
        built = ensure_test_image(args.cache, say=lambda line: print(line, file=sys.stderr))
    except EnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{built.path}\t{built.size_bytes / 2**20:.0f} MiB\tbuilt in {built.build_seconds:.0f} s "
          f"(Debian tree {built.base_seconds:.0f} s, assembly {built.assemble_seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
