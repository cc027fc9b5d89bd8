"""Which files a block of code opens and reads, as the kernel saw it (inotify).

No spy on ``os.open`` or ``os.pread``: compiled code (``sif.exact._firstc``)
makes its system calls past any Python patch, and inotify sees both alike.
Linux only; the events of each watched directory come in the order of the
calls (two equal events in a row are merged into one by the kernel).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

IN_ACCESS = 0x1
IN_CLOSE_NOWRITE = 0x10
IN_OPEN = 0x20
IN_Q_OVERFLOW = 0x4000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_libc = ctypes.CDLL(None, use_errno=True)
_HEADER = struct.Struct("iIII")


@dataclass
class Seen:
    """The files (full paths) of the watched directories, by what was done to them."""

    events: list[tuple[str, int]] = field(default_factory=list)
    """(path, mask) in the order the kernel queued them, directories left out."""

    def paths(self, mask: int) -> list[str]:
        """The paths of the events with ``mask``, in order (a path as often as it came)."""
        return [p for p, m in self.events if m & mask]

    @property
    def opened(self) -> list[str]:
        return self.paths(IN_OPEN)

    @property
    def first_reads(self) -> list[str]:
        """Each path read, once, in the order of its first read."""
        return list(dict.fromkeys(self.paths(IN_ACCESS)))


@contextmanager
def watching(*tops: str | os.PathLike[str]) -> Iterator[Seen]:
    """Watch every directory under ``tops`` (as they are now) for opens, reads and closes;
    the events are in the :class:`Seen` yielded once the block is done."""
    fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    seen = Seen()
    try:
        dirs: dict[int, bytes] = {}
        for top in tops:
            for dirpath, _, _ in os.walk(os.fsencode(top)):
                wd = _libc.inotify_add_watch(fd, dirpath, IN_OPEN | IN_ACCESS | IN_CLOSE_NOWRITE)
                if wd < 0:
                    raise OSError(ctypes.get_errno(), "inotify_add_watch", dirpath)
                dirs[wd] = dirpath
        yield seen
        buf = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            buf += chunk
        pos = 0
        while pos < len(buf):
            wd, mask, _, n = _HEADER.unpack_from(buf, pos)
            name = buf[pos + _HEADER.size : pos + _HEADER.size + n].rstrip(b"\0")
            pos += _HEADER.size + n
            if mask & IN_Q_OVERFLOW:
                raise AssertionError("inotify's queue overflowed: watch a smaller tree")
            if mask & IN_ISDIR or not name:
                continue
            seen.events.append((os.fsdecode(os.path.join(dirs[wd], name)), mask))
    finally:
        os.close(fd)
