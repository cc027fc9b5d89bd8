"""The re-check before every step: the same files, unchanged, with equal bytes.

Both the kept copy and the file to drop are opened with
:func:`sif.fileio.open_regular` (no symlink followed, only the report's
``(device, inode)``); their ``fstat`` must show the size, mtime and ctime the
report recorded (or that sif's own previous step left); then their bytes are
compared through the open descriptors: a file of up to 1 MiB in one ``pread``
each, a larger one block by block in two reusable 1 MiB buffers (``==`` on
bytes is a ``memcmp``). Exactly the size both ``fstat`` calls showed is read;
the step ``fstat``-s both descriptors again just before it acts, so a file
that grew, shrank or was written to meanwhile is left alone. Any difference
is a :class:`Changed` naming the file and the cause; the step is then skipped.

:func:`recheck_pair` does all of it for one step. Where the extension
``sif.actions._fsc`` is built (C, optional like the winnowing kernel),
the opens, ``fstat`` calls, reads and comparison run there, in one call
without the GIL, so the run's lanes re-check on several CPUs at once (in
Python, every one of a small file's six system calls handed the GIL to the
other lane and back: two lanes were no faster than one); the decisions, and
every message, are this module's either way.
"""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

from sif.actions.fsops import BLOCK, read_block
from sif.actions.plan import FileRef
from sif.events import display_path
from sif.fileio import kind_name, open_regular

try:
    from sif.actions import _fsc  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # no compiler at install time: the same re-check in Python
    _fsc = None


class Changed(Exception):
    """The world differs from the report: the step is skipped. ``str()`` names path and cause."""

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


class Expected(NamedTuple):
    """What a file must look like now: the report's figures, or those sif's last step left."""

    size: int
    mtime_ns: int
    ctime_ns: int | None  # None: changed by a step whose outcome sif inferred (resume)

    @classmethod
    def of(cls, ref: FileRef) -> Expected:
        return cls(ref.size, ref.mtime_ns, ref.ctime_ns)

    @classmethod
    def now(cls, st: os.stat_result) -> Expected:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def check_stat(path: str, st: os.stat_result, want: Expected) -> None:
    """Raise :class:`Changed` unless ``st`` shows ``want``'s size, mtime and ctime."""
    if (st.st_size, st.st_mtime_ns) == want[:2] and want.ctime_ns in (None, st.st_ctime_ns):
        return
    if st.st_size != want.size:
        raise Changed(path, f"size changed since the report ({want.size} -> {st.st_size} bytes)")
    if st.st_mtime_ns != want.mtime_ns:
        raise Changed(path, "modified since the report (mtime differs)")
    if want.ctime_ns is not None and st.st_ctime_ns != want.ctime_ns:
        raise Changed(path, "changed since the report (ctime differs: content, owner or mode)")


def open_checked(ref: FileRef, want: Expected) -> tuple[int, os.stat_result]:
    """Open ``ref.path`` as the report's inode and check its stat; raise :class:`Changed`."""
    try:
        fd, st = open_regular(ref.path, expect=ref.key, follow_symlinks=False)
    except ValueError as exc:  # a NUL byte, an unencodable character: no file has that name
        raise Changed(ref.path, f"not a possible file name ({exc})") from None
    except FileNotFoundError:
        raise Changed(ref.path, "vanished since the report") from None
    except OSError as exc:
        if exc.strerror and "replaced" in exc.strerror:
            raise Changed(ref.path, "replaced by another file since the report") from None
        raise Changed(ref.path, exc.strerror or str(exc)) from None
    try:
        check_stat(ref.path, st, want)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


class Comparer:
    """Compares two open files: one ``pread`` each up to a block, else two reusable buffers."""

    def __init__(self, block: int = BLOCK, compiled: bool = True) -> None:
        self.block = block
        self.a = bytearray(block)
        self.b = bytearray(block)
        self.bytes_read = 0
        self.compiled = compiled
        """False: :func:`recheck_pair` takes the Python re-check even where the compiled
        one is built (the tests run both)."""

    def same(self, fd_a: int, fd_b: int, size: int) -> bool:
        """True when both files' first ``size`` bytes are there and equal.

        Reads exactly ``size`` bytes of each (no read past them: the caller has
        ``fstat``-ed both at ``size`` and does so again before acting).
        """
        if size <= self.block:
            a, b = _pread_all(fd_a, size), _pread_all(fd_b, size)
            self.bytes_read += len(a) + len(b)
            return len(a) == size and a == b
        va, vb = memoryview(self.a), memoryview(self.b)
        offset = 0
        while offset < size:
            n = min(self.block, size - offset)
            na = read_block(fd_a, va[:n], offset)
            nb = read_block(fd_b, vb[:n], offset)
            self.bytes_read += na + nb
            if na != n or nb != n:
                return False
            if n == self.block:
                if self.a != self.b:  # a memcmp
                    return False
            elif self.a[:n] != self.b[:n]:  # the last block: two copies and a memcmp
                return False
            offset += n
        return True


def _pread_all(fd: int, size: int) -> bytes:
    """The first ``size`` bytes of ``fd`` (fewer only if the file is shorter now)."""
    data = os.pread(fd, size, 0)
    while len(data) < size:  # a short read: a regular file gives one only at its end
        more = os.pread(fd, size - len(data), len(data))
        if not more:
            break
        data += more
    return data


def recheck_pair(
    keep: FileRef, kwant: Expected, drop: FileRef, dwant: Expected, comparer: Comparer
) -> tuple[int, os.stat_result, int, os.stat_result]:
    """Open both files of a step as the report's inodes, check their figures against
    ``kwant`` and ``dwant``, compare ``keep.size`` bytes; return both descriptors (open:
    the caller closes them) and their ``fstat``. Raise :class:`Changed` for any
    difference (the step is skipped), an ``OSError`` for a read that failed."""
    if (
        _fsc is None
        or not comparer.compiled
        or (keep.dev | keep.ino | drop.dev | drop.ino) >> 64  # not a C dev_t, ino_t: it
        # would wrap there ("K"), 2**64 + n matching inode n; no file has it
        or kwant.ctime_ns == -1  # -1 is "any ctime" there
        or dwant.ctime_ns == -1
    ):
        return _recheck_python(keep, kwant, drop, dwant, comparer)
    try:
        out = _fsc.recheck(
            keep.path,
            keep.dev,
            keep.ino,
            kwant.size,
            kwant.mtime_ns,
            -1 if kwant.ctime_ns is None else kwant.ctime_ns,
            drop.path,
            drop.dev,
            drop.ino,
            dwant.size,
            dwant.mtime_ns,
            -1 if dwant.ctime_ns is None else dwant.ctime_ns,
            keep.size,
            comparer.a,
            comparer.b,
        )
    except (ValueError, OverflowError):  # a name or a figure no file has (a crafted report):
        return _recheck_python(keep, kwant, drop, dwant, comparer)  # the Python one says so
    status, which, err, kfd, kst, dfd, dst, nread = out
    comparer.bytes_read += nread
    if status == 0:
        return kfd, _stat(kst), dfd, _stat(dst)
    ref, st, want = (keep, kst, kwant) if which == 0 else (drop, dst, dwant)
    if status == 1:
        raise _open_failed(ref, err)
    if status == 2:
        raise Changed(ref.path, f"not a regular file ({kind_name(st[0])})")
    if status == 3:
        raise Changed(ref.path, "replaced by another file since the report")
    if status == 4:
        check_stat(ref.path, _stat(st), want)
        raise AssertionError("the compiled re-check and check_stat disagree")  # pragma: no cover
    if status == 5:
        raise _differ(keep, drop)
    raise OSError(err, os.strerror(err), ref.path)


def _recheck_python(
    keep: FileRef, kwant: Expected, drop: FileRef, dwant: Expected, comparer: Comparer
) -> tuple[int, os.stat_result, int, os.stat_result]:
    kfd, kst = open_checked(keep, kwant)
    dfd = -1
    try:
        dfd, dst = open_checked(drop, dwant)
        if not comparer.same(kfd, dfd, keep.size):
            raise _differ(keep, drop)
        return kfd, kst, dfd, dst
    except BaseException:
        os.close(kfd)
        if dfd >= 0:
            os.close(dfd)
        raise


def _differ(keep: FileRef, drop: FileRef) -> Changed:
    return Changed(drop.path, f"its bytes differ from the kept copy {display_path(keep.path)}")


def _open_failed(ref: FileRef, err: int) -> Changed:
    """What :func:`open_checked` says of an ``open`` or ``fstat`` that failed with ``err``."""
    if err == errno.ENOENT:
        return Changed(ref.path, "vanished since the report")
    if err == errno.ELOOP:
        return Changed(ref.path, "is a symbolic link now")
    return Changed(ref.path, os.strerror(err))


def _stat(t: tuple[int, ...]) -> os.stat_result:
    """An ``os.stat_result`` of the compiled re-check's figures (mode, ino, dev, nlink,
    uid, gid, size, atime_ns, mtime_ns, ctime_ns)."""
    mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime = t
    g = 1_000_000_000
    (a, an), (m, mn), (c, cn) = divmod(atime, g), divmod(mtime, g), divmod(ctime, g)
    floats = (a + an * 1e-9, m + mn * 1e-9, c + cn * 1e-9)  # as os.stat makes them
    return os.stat_result(
        (mode, ino, dev, nlink, uid, gid, size, a, m, c, *floats, atime, mtime, ctime)
    )
