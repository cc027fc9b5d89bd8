"""What the walker is asked for: :class:`WalkOptions`, and what it met: :class:`WalkStats`.

Also the parsing that goes with them (sizes such as ``4K``, lists of paths,
globs). Kept apart from :mod:`sif.walk` (which re-exports every public name
here) so that each module holds one job: this one says which files, the
walk finds them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from sif.errors import ConfigError


@dataclass(frozen=True)
class WalkOptions:
    """Which files the walker yields. Sizes are in bytes, bounds inclusive.

    ``include`` and ``exclude`` are shell globs. A glob without ``/`` matches
    the file's name; a glob with ``/`` matches the whole path. ``exclude``
    also prunes directories; ``include`` applies to files only.
    """

    min_size: int = 0
    max_size: int | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    hidden: bool = True
    follow_symlinks: bool = False
    one_file_system: bool = False
    empty: bool = False
    skip_dirs: frozenset[tuple[int, int]] = frozenset()
    """Directories, by ``(st_dev, st_ino)``, never entered (the index's own, say);
    a root that is one of them, or lies under one, is skipped too."""

    def __post_init__(self) -> None:
        if not isinstance(self.skip_dirs, frozenset):  # a set, a list of pairs: frozen
            object.__setattr__(self, "skip_dirs", frozenset(map(tuple, self.skip_dirs)))
        if self.min_size < 0:
            raise ConfigError(f"--min-size must be >= 0, got {self.min_size}")
        if self.max_size is not None and self.max_size < self.min_size:
            raise ConfigError(
                f"--max-size ({self.max_size}) is smaller than --min-size ({self.min_size})"
            )


@dataclass
class WalkStats:
    """What the walker met, for the summary."""

    files: int = 0
    bytes: int = 0
    directories: int = 0
    special: int = 0
    symlinks_skipped: int = 0
    filtered: int = 0
    warnings: int = 0


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE_MAX = (1 << 63) - 1
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"10"``, ``"4K"``, ``"1.5MiB"``, ``"2G"`` -> bytes (binary units).

    Raises :class:`ConfigError` for anything else.
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ConfigError(f"not a size: {text!r} (use e.g. 100, 4K, 10M, 1G)")
    size = int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])
    if size > _SIZE_MAX:  # no file is larger (and a C off_t overflowed deep in the walk)
        raise ConfigError(f"not a size a file can have: {text!r} (at most 8 EiB)")
    return size


def read_path_list(stream: BinaryIO, nul: bool = False) -> Iterator[str]:
    """Paths from a list, one per line (or NUL-terminated with ``nul``), as raw names.

    Empty entries are skipped. Names keep their exact bytes (surrogate escapes). A
    device (``/dev/zero``) is refused: read whole, it took every byte of memory.
    """
    from sif.fileio import refuse_device

    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.BytesIO: no descriptor, no device
        fd = -1
    if fd >= 0:
        refuse_device(fd, getattr(stream, "name", None) or "the list")
    data = stream.read()
    sep = b"\0" if nul else b"\n"
    for raw in data.split(sep):
        if not nul and raw.endswith(b"\r"):
            raw = raw[:-1]
        if raw:
            yield os.fsdecode(raw)


class _Matcher:
    """Compiled include/exclude globs."""

    def __init__(self, globs: tuple[str, ...]) -> None:
        names = [g for g in globs if "/" not in g]
        paths = [g for g in globs if "/" in g]
        self.name_re = re.compile("|".join(fnmatch.translate(g) for g in names)) if names else None
        self.path_re = re.compile("|".join(fnmatch.translate(g) for g in paths)) if paths else None
        self.empty = not globs

    def match(self, name: str, path: str) -> bool:
        if self.name_re is not None and self.name_re.match(name):
            return True
        return self.path_re is not None and self.path_re.match(path) is not None
