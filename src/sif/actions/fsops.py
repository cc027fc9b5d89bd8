"""The file-system operations the actions are made of, each safe on its own.

- :func:`temp_name`: an unpredictable name beside a target (``.sif-<random>.tmp``),
  used with calls that fail when the name exists (``link``, ``symlink``,
  ``O_EXCL``), so a temporary name never replaces anything;
- :func:`rename_noreplace`: ``renameat2(RENAME_NOREPLACE)``, or ``link`` then
  ``unlink`` where the kernel or the file system lacks it: never overwrites;
- :func:`dedupe_range`: ``FIDEDUPERANGE``: the kernel compares the bytes under
  its locks and shares the extents only where they are equal;
- :func:`extents_shared`: ``FS_IOC_FIEMAP`` of two files: every extent at the
  same physical place (a dedupe would be a no-op);
- :func:`copy_to_temp`: an independent copy (plain ``read``/``write``, never
  ``copy_file_range``, which may share extents) of an open file, beside a
  target, with the digest of what was written.

Nothing here deletes a file it did not create.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ctypes

BLOCK = 1024 * 1024
"""Bytes per read when copying or comparing: memory stays bounded."""

FIDEDUPERANGE = 0xC0189436
"""``_IOWR(0x94, 54, struct file_dedupe_range)`` (24 bytes)."""
FS_IOC_FIEMAP = 0xC020660B
"""``_IOWR('f', 11, struct fiemap)`` (32 bytes)."""
DEDUPE_CHUNK = 16 * 1024 * 1024
"""Bytes per ``FIDEDUPERANGE`` call: Btrfs caps one call at 16 MiB."""
FILE_DEDUPE_RANGE_DIFFERS = 1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNKNOWN = 0x2
FIEMAP_EXTENT_DELALLOC = 0x4
FIEMAP_EXTENT_INLINE = 0x200
_FIEMAP_FLAG_SYNC = 0x1
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100

NO_REFLINK_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.ENOSYS})
"""Errors that mean "this file system cannot share extents" (not a per-file problem)."""


class _Random:
    """64-bit random names from the kernel's generator, drawn 1,024 at a time: one
    ``getrandom`` a step cost ~9 us of a ~90 us link step. Thread-safe; a forked child
    draws its own (it never reuses a name its parent may use)."""

    DRAW = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left: list[str] = []
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._left = []

    def token(self) -> str:
        with self._lock:
            if not self._left:
                raw = os.urandom(8 * self.DRAW).hex()
                self._left = [raw[i : i + 16] for i in range(0, len(raw), 16)]
            return self._left.pop()


_RANDOM = _Random()


def temp_name(directory: str) -> str:
    """An unpredictable name in ``directory`` (``.sif-<64 random bits>.tmp``), each
    drawn once."""
    return os.path.join(directory, f".sif-{_RANDOM.token()}.tmp")


def make_temp(directory: str, create: Callable[[str], None], tries: int = 8) -> str:
    """Call ``create(name)`` (which must fail with EEXIST on a taken name) on a fresh name."""
    for _ in range(tries):
        name = temp_name(directory)
        try:
            create(name)
        except FileExistsError:
            continue
        return name
    raise FileExistsError(errno.EEXIST, "no free temporary name", directory)


_libc: ctypes.CDLL | None = None
_renameat2: object = None


def _load_libc(ctypes: Any) -> ctypes.CDLL:
    """The C library: ``libc.so.6`` (glibc) at once, else the one ``find_library`` names."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        import ctypes.util

        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _renameat2_func() -> object:
    global _libc, _renameat2
    if _renameat2 is None:
        import ctypes  # here: its import (and find_library's ldconfig) is paid only when needed

        try:
            _libc = _load_libc(ctypes)
            func = _libc.renameat2
            func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
            func.argtypes += [ctypes.c_uint]
            func.restype = ctypes.c_int
            _renameat2 = func
        except (OSError, AttributeError):
            _renameat2 = False
    return _renameat2


def rename_noreplace(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst``; ``FileExistsError`` if ``dst`` exists (never overwrites)."""
    func = _renameat2_func()
    if func:
        rc = func(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)  # type: ignore[operator]
        if rc == 0:
            return
        import ctypes

        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), src, None, dst)
    # No renameat2 here: a hard link fails on an existing name, then the old name goes.
    os.link(src, dst, follow_symlinks=False)
    os.unlink(src)


def dedupe_range(src_fd: int, dst_fd: int, size: int) -> int:
    """Share the extents of ``dst_fd`` with ``src_fd`` over ``size`` bytes; bytes deduped.

    The kernel compares both ranges itself and refuses where they differ:
    that is an ``OSError`` with ``EILSEQ`` ("bytes differ"). A file system
    that cannot share extents raises one of :data:`NO_REFLINK_ERRNOS`.
    """
    offset = 0
    total = 0
    while offset < size:
        length = min(DEDUPE_CHUNK, size - offset)
        arg = bytearray(struct.pack("=QQHHI", offset, length, 1, 0, 0))
        arg += struct.pack("=qQQiI", dst_fd, offset, 0, 0, 0)
        fcntl.ioctl(src_fd, FIDEDUPERANGE, arg, True)
        _, _, deduped, status, _ = struct.unpack_from("=qQQiI", arg, 24)
        if status < 0:
            raise OSError(-status, os.strerror(-status))
        if status == FILE_DEDUPE_RANGE_DIFFERS:
            raise OSError(errno.EILSEQ, "bytes differ (the kernel compared them)")
        if deduped <= 0:
            if size - offset < 4096:
                # The unaligned tail of a file that is not the end of both: left as it is.
                break
            raise OSError(errno.EIO, "the kernel deduped nothing")
        offset += deduped
        total += deduped
    return total


def probe_dedupe(fd: int) -> None:
    """A ``FIDEDUPERANGE`` of 0 bytes of ``fd`` onto itself: raises where the file system cannot."""
    arg = bytearray(struct.pack("=QQHHI", 0, 0, 1, 0, 0)) + struct.pack("=qQQiI", fd, 0, 0, 0, 0)
    fcntl.ioctl(fd, FIDEDUPERANGE, arg, True)
    status = struct.unpack_from("=qQQiI", arg, 24)[3]
    if status < 0:
        raise OSError(-status, os.strerror(-status))


def _extents(fd: int) -> list[tuple[int, int, int, int]] | None:
    """``(logical, physical, length, flags)`` of every extent, or ``None`` if unknown."""
    out: list[tuple[int, int, int, int]] = []
    start = 0
    count = 256
    while True:
        arg = bytearray(struct.pack("=QQIIII", start, 2**64 - 1, _FIEMAP_FLAG_SYNC, 0, count, 0))
        arg += bytes(56 * count)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, arg, True)
        except OSError:
            return None
        mapped = struct.unpack_from("=I", arg, 20)[0]
        if mapped == 0:
            return out
        last = False
        for i in range(mapped):
            logical, physical, length, _, _, flags = struct.unpack_from("=QQQQQI", arg, 32 + 56 * i)
            out.append((logical, physical, length, flags))
            start = logical + length
            last = bool(flags & FIEMAP_EXTENT_LAST)
        if last:
            return out


def extents_shared(fd_a: int, fd_b: int) -> bool:
    """True when both files' data lie in the very same physical extents (and there are some)."""
    a, b = _extents(fd_a), _extents(fd_b)
    if not a or a is None or b is None:
        return False
    odd = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_INLINE

    def key(ext: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int]]:
        return [(lo, ph, ln) for lo, ph, ln, _ in ext]

    if any(f & odd for *_, f in a + b):
        return False
    return key(a) == key(b)


def read_block(fd: int, buf: bytearray | memoryview, offset: int) -> int:
    """Fill ``buf`` from ``offset`` (short only at the end of the file); bytes read."""
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            break
        got += n
    return got


def copy_to_temp(
    src_fd: int, size: int, directory: str, hasher: Callable[[], object]
) -> tuple[str, str]:
    """An independent copy of ``src_fd`` in ``directory``: ``(temporary name, hex digest)``.

    Written with plain ``write`` calls and fsynced; the caller renames it
    into place or removes it.
    """
    holder: list[int] = []

    def create(name: str) -> None:
        holder.append(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))

    name = make_temp(directory, create)
    fd = holder[0]
    h = hasher()
    try:
        buf = bytearray(min(BLOCK, max(size, 1)))
        offset = 0
        while True:
            n = read_block(src_fd, buf, offset)
            if n == 0:
                break
            chunk = memoryview(buf)[:n]
            h.update(chunk)  # type: ignore[attr-defined]
            written = 0
            while written < n:
                written += os.write(fd, chunk[written:])
            offset += n
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise
    os.close(fd)
    return name, h.hexdigest()  # type: ignore[attr-defined]
