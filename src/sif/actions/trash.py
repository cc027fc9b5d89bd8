"""The user's trash, as the freedesktop.org Trash specification (1.0) has it.

A file on the device of ``$XDG_DATA_HOME`` goes to ``$XDG_DATA_HOME/Trash``;
a file on another device goes to its mount point's ``.Trash/$UID`` (when
``.Trash`` is a sticky directory, not a symlink) or ``.Trash-$UID``. So a
file is always *renamed* into the trash, never copied to another device.

For each file, ``info/NAME.trashinfo`` is created first with ``O_EXCL``
(which reserves ``NAME``), then the file is renamed to ``files/NAME``
without replacing anything. The caller learns ``NAME``, which ``sif undo``
needs (``send2trash`` tells nobody where a file went, and falls back to a
copy into the home trash on another device: hence this module).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import stat
import urllib.parse
from dataclasses import dataclass


@dataclass(frozen=True)
class TrashCan:
    """One trash directory (``files/`` and ``info/`` under ``root``) and its top directory."""

    root: str
    topdir: str | None  # None: the home trash (absolute paths in the info files)


def _mount_point(path: str, dev: int) -> str:
    path = os.path.dirname(os.path.abspath(path))
    while path != "/":
        parent = os.path.dirname(path)
        if os.lstat(parent).st_dev != dev:
            return path
        path = parent
    return path


def _private_dir(path: str) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(errno.EPERM, "not a trash directory of this user", path)


def trash_can(path: str, dev: int) -> TrashCan:
    """The trash directory for ``path`` (on device ``dev``), made if needed."""
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    home_trash = os.path.join(data_home, "Trash")
    os.makedirs(data_home, mode=0o700, exist_ok=True)
    if os.stat(data_home).st_dev == dev:
        can = TrashCan(home_trash, None)
    else:
        top = _mount_point(path, dev)
        shared = os.path.join(top, ".Trash")
        uid = str(os.getuid())
        try:
            st = os.lstat(shared)
            usable = stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_ISVTX)
        except FileNotFoundError:
            usable = False
        root = os.path.join(shared, uid) if usable else os.path.join(top, f".Trash-{uid}")
        can = TrashCan(root, top)
    _private_dir(can.root) if can.topdir is not None else os.makedirs(can.root, 0o700, True)
    for sub in ("files", "info"):
        _private_dir(os.path.join(can.root, sub))
    return can


def info_text(path: str, can: TrashCan) -> bytes:
    """The ``.trashinfo`` of ``path`` (relative to the top directory outside the home trash)."""
    shown = path if can.topdir is None else os.path.relpath(path, can.topdir)
    when = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    quoted = urllib.parse.quote(os.fsencode(shown), safe="/")
    return f"[Trash Info]\nPath={quoted}\nDeletionDate={when}\n".encode()


#: The longest name of a file in the trash: its info file's, with ``.trashinfo`` and a
#: number (``.999``) added, must be a name the file system takes (255 bytes).
_NAME_MAX = 255 - len(".trashinfo") - len(".999")


def _fitting(name: str) -> str:
    """``name``, its stem cut short enough for the trash (a name of 246-255 bytes made an
    info file name too long, and every such file failed to go to the trash)."""
    raw = os.fsencode(name)
    if len(raw) <= _NAME_MAX:
        return name
    stem, ext = os.path.splitext(raw)
    if len(ext) > 16:
        stem, ext = raw, b""
    cut = stem[: _NAME_MAX - len(ext)]
    return os.fsdecode(cut + ext)  # a cut UTF-8 character stays its bytes (surrogates)


def reserve(path: str, can: TrashCan, tries: int = 1000) -> tuple[str, str]:
    """Create the info file of ``path`` under a free name: ``(files/NAME, info/NAME.trashinfo)``."""
    base = _fitting(os.path.basename(path))
    stem, ext = os.path.splitext(base)
    text = info_text(path, can)
    for n in range(tries):
        name = base if n == 0 else f"{stem}.{n}{ext}"
        info = os.path.join(can.root, "info", name + ".trashinfo")
        dest = os.path.join(can.root, "files", name)
        if os.path.lexists(dest):
            continue
        try:
            fd = os.open(info, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        try:
            if os.write(fd, text) != len(text):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), info)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(info)  # sif's own, empty or cut short: never left behind
            raise
        os.close(fd)
        return dest, info
    raise OSError(errno.EEXIST, "no free name in the trash", can.root)


def written_for(info: str, path: str) -> bool:
    """Whether ``info`` is a ``.trashinfo`` (a regular file, not a link) whose ``Path=``
    names ``path``: sif's own for that file, which it may remove, and not one another
    program wrote after sif's was gone (a file of the same name trashed since)."""
    try:
        fd = os.open(info, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        text = os.read(fd, 1 << 16)
    except OSError:
        return False
    finally:
        os.close(fd)
    for line in text.split(b"\n"):
        if line.startswith(b"Path="):
            named = os.fsdecode(urllib.parse.unquote_to_bytes(line[5:].strip()))
            if named.startswith("/"):
                return named == path
            return path.endswith("/" + named)  # relative to its mount point (topdir)
    return False
