"""Opening a user's file safely: a regular file, the one the walk saw, never a FIFO.

Every command that reads a file named on the command line or met by the walk
opens it here. ``open()`` on a FIFO blocks until a writer comes; on a device
(``/dev/zero``) it reads without end; a name swapped for a symlink after the
walk leads elsewhere; a terminal opened by a process that has none becomes
its controlling terminal. So a file is opened with ``O_NONBLOCK`` (a FIFO opens
at once and is then refused), ``O_NOCTTY``, ``O_NOFOLLOW`` where links are not
followed, and
``fstat`` of the descriptor decides: only a regular file goes on, and, when
the walk's ``(device, inode)`` is given, only that one.

Errors are :class:`OSError` values whose ``strerror`` is a cause fit for a
warning line (``"not a regular file (FIFO)"``, ``"replaced since the walk"``).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO, cast

_KIND = {
    stat.S_IFIFO: "FIFO",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
    stat.S_IFDIR: "directory",
    stat.S_IFLNK: "symbolic link",
}


_NOATIME = getattr(os, "O_NOATIME", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
"""A terminal swapped in for a file never becomes this process's controlling terminal."""


class NotRegularFile(OSError):
    """The name is not (or is no longer) the regular file it should be."""


def kind_name(mode: int) -> str:
    """``"FIFO"``, ``"character device"`` ... for a ``st_mode``."""
    return _KIND.get(stat.S_IFMT(mode), "special file")


def open_regular(
    path: str | bytes | os.PathLike[str],
    *,
    expect: tuple[int, int] | None = None,
    follow_symlinks: bool = True,
    noatime: bool = False,
) -> tuple[int, os.stat_result]:
    """Open ``path`` read-only; return the descriptor and its ``fstat``.

    Refuses (with :class:`NotRegularFile`) anything but a regular file, and,
    with ``expect = (dev, ino)``, a file other than that one. With
    ``follow_symlinks`` false, a name that is a symbolic link is refused
    (``O_NOFOLLOW``). With ``noatime``, ``O_NOATIME`` where the kernel allows
    it (the file's owner, or root): reading leaves the access time alone.
    The descriptor is left blocking, so reads behave as usual. Cost: one
    ``open`` and one ``fstat``; the caller closes the descriptor.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | _NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        if noatime and _NOATIME:
            try:
                fd = os.open(path, flags | _NOATIME)
            except PermissionError:
                fd = os.open(path, flags)  # O_NOATIME needs ownership
        else:
            fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise NotRegularFile(errno.ELOOP, "is a symbolic link now", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(
                errno.EINVAL, f"not a regular file ({kind_name(st.st_mode)})", path
            )
        if expect is not None and (st.st_dev, st.st_ino) != expect:
            raise NotRegularFile(errno.ESTALE, "replaced by another file since the walk", path)
        # O_NONBLOCK stays: it changes nothing for a regular file (reads of one never
        # wait on a writer), and clearing it would cost two fcntl calls a file.
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular_file(
    path: str | bytes | os.PathLike[str],
    *,
    expect: tuple[int, int] | None = None,
    follow_symlinks: bool = True,
    buffering: int = -1,
) -> tuple[BinaryIO, os.stat_result]:
    """:func:`open_regular` as a binary file object (``open(fd, "rb")``) and its ``fstat``."""
    fd, st = open_regular(path, expect=expect, follow_symlinks=follow_symlinks)
    try:
        return cast(BinaryIO, os.fdopen(fd, "rb", buffering=buffering)), st
    except BaseException:
        os.close(fd)
        raise


def refuse_device(fd: int, shown: str) -> None:
    """:class:`sif.errors.InputError` if ``fd`` is a device other than a terminal: a list
    or an anchor file read whole (``--from-file /dev/zero``, ``-m /dev/zero``, ``--anchors
    /dev/zero``) was read until memory ran out. A terminal, a FIFO, a regular file pass."""
    from sif.errors import InputError

    st = os.fstat(fd)
    null = stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)  # empty: harmless
    if (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) and not (null or os.isatty(fd)):
        raise InputError(f"{shown}: a device, not a file to read whole")
