"""Enter a desktop's own user namespace, then exec the rest of the command line as its root.

Run by the host's root just before bubblewrap, as ``python3 -I -S userns.py [--stage NAME=PATH]...
ROOT_UID USER_UID -- COMMAND...`` (standard library only, so the system interpreter starts it
in milliseconds).
It makes a new user namespace with two ids mapped and nothing else:

* 0 inside is ``ROOT_UID`` outside: the desktop's root, an unprivileged uid of the host
  leased for this desktop alone;
* ``USER_UID`` inside is ``USER_UID`` outside: the desktop's account, as before.

The process then becomes uid 0 of that namespace and execs the command (bubblewrap), whose
namespaces (mount, pid, network, IPC, UTS) are therefore owned by it. Root of the desktop
holds capabilities only there: over the desktop's own processes and mounts, and over files
whose owner is one of the two mapped ids (the desktop's home and private folders). Every
host file belongs to an unmapped id and is seen as ``nobody``, out of its reach, and it
sees no host process. The host pid of this process stays that of the whole chain (the map
is written by a short-lived child, which still stands in the host's namespace).

Before leaving the host's namespace it shows each ``--stage`` path at ``STAGE/NAME``, where
bubblewrap (running as the desktop's root) can bind it from: the desktop's root may not even
traverse the root-only folders the home and the sources live in. STAGE is a tmpfs over /tmp
of the private mount namespace this runs in (made for this one sandbox by `homes`; bubblewrap
puts the desktop's own /tmp over it), each path bound there from a descriptor opened before
the tmpfs hid anything. And it
sets the namespace's ``user.max_user_namespaces`` to 0 while it still holds every
capability there: nothing in the desktop (its root included, which has no
``CAP_SYS_RESOURCE``) can make a user namespace of its own.
"""

import ctypes
import os
import sys

_CLONE_NEWUSER = 0x10000000


def _map(pid: int, root_uid: int, user_uid: int) -> None:
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as handle:
            handle.write(f"0 {root_uid} 1\n{user_uid} {user_uid} 1\n")


#: Where staged paths appear (in this sandbox's private mount namespace only).
STAGE = "/tmp"
_MS_BIND, _MS_REC = 4096, 16384


def _mount(libc: ctypes.CDLL, source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    if libc.mount(source, target, fstype, flags, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source.decode()} on {target.decode()}: {os.strerror(err)}")


def _stage(libc: ctypes.CDLL, specs: list[str]) -> None:
    """Bind each ``NAME=PATH`` at ``STAGE/NAME`` (a fresh tmpfs), from descriptors opened first."""
    opened = []
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name.isalnum():
            raise ValueError(f"bad stage name {name!r}")
        opened.append((name, os.open(path, os.O_PATH | os.O_CLOEXEC)))
    _mount(libc, b"agent-s3-stage", STAGE.encode(), b"tmpfs", 0, b"mode=0755,size=64k")
    for name, fd in opened:
        target = os.path.join(STAGE, name)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(libc, f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND | _MS_REC, None)
        os.close(fd)


def main(argv: list[str]) -> int:
    stage = []
    while argv[:1] == ["--stage"] and len(argv) > 1:
        stage.append(argv[1])
        argv = argv[2:]
    if len(argv) < 4 or argv[2] != "--":
        print("usage: userns.py [--stage NAME=PATH]... ROOT_UID USER_UID -- COMMAND...", file=sys.stderr)
        return 2
    root_uid, user_uid = int(argv[0]), int(argv[1])
    if root_uid == user_uid or 0 in (root_uid, user_uid):
        print("error: the desktop's root and user need two distinct unprivileged uids", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if stage:
        try:
            _stage(libc, stage)
        except (OSError, ValueError) as exc:
            print(f"error: cannot show the desktop its folders: {exc}", file=sys.stderr)
            return 1
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:  # stays in the host's user namespace, where mapping ids is allowed
        os.close(go_w)
        code = 1
        try:
            if os.read(go_r, 1) == b"1":
                _map(os.getppid(), root_uid, user_uid)
                code = 0
        except OSError as exc:
            print(f"error: cannot map the desktop's user namespace: {exc}", file=sys.stderr)
        os._exit(code)
    os.close(go_r)
    if libc.unshare(_CLONE_NEWUSER) != 0:
        err = ctypes.get_errno()
        os.write(go_w, b"0")
        os.waitpid(child, 0)
        print(f"error: cannot make the desktop's user namespace: {os.strerror(err)}", file=sys.stderr)
        return 1
    os.write(go_w, b"1")
    os.close(go_w)
    _, status = os.waitpid(child, 0)
    if status != 0:
        return 1
    os.setresgid(0, 0, 0)
    os.setgroups([])
    os.setresuid(0, 0, 0)
    with open("/proc/sys/user/max_user_namespaces", "w") as limit:  # this namespace's own limit
        limit.write("0\n")
    command = argv[3:]
    os.execvp(command[0], command)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
