"""Warnings and progress: what the library reports while it works.

The library never prints. It hands :class:`ScanWarning` values to an
``on_warning`` callback and progress to a :class:`Progress` object; both
default to null objects, and the CLI passes ones that write to stderr.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ScanWarning:
    """A per-file problem: the scan skipped ``path`` (or part of it) because of ``cause``.

    ``skipped`` is false for a note that skips nothing (a name that is not
    valid UTF-8, shown escaped): the CLI prints it but does not count it as a
    warning (exit status 1 means some paths were skipped).
    """

    path: str
    cause: str
    skipped: bool = True

    def __str__(self) -> str:
        return f"{display_path(self.path)}: {self.cause}"


WarningSink = Callable[[ScanWarning], None]


def ignore_warning(_: ScanWarning) -> None:
    """The default warning sink: drop it."""


class Progress(Protocol):
    """Progress of a long stage, for a progress bar. Every method must be cheap."""

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        """A new stage starts; ``total`` is its amount of work if known."""

    def advance(self, amount: int = 1) -> None:
        """``amount`` more units of the current stage are done."""

    def log(self, message: str) -> None:
        """A one-line note about the run (survivors of a stage, for instance)."""

    def close(self) -> None:
        """The run is over."""


class NullProgress:
    """A :class:`Progress` that does nothing."""

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        pass

    def advance(self, amount: int = 1) -> None:
        pass

    def log(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


_CONTROL = {i: f"\\x{i:02x}" for i in range(32)} | {
    0x7F: "\\x7f",
    ord("\n"): "\\n",
    ord("\t"): "\\t",
    ord("\r"): "\\r",
}


_NEEDS_QUOTING = re.compile("[\x00-\x1f\x7f\udc80-\udcff]|^\\$'")


def needs_quoting(path: str) -> bool:
    """Whether ``path`` holds bytes that are not valid UTF-8 or control characters, or
    begins as a quoted name does (``$'``: shown as it is, ``$'x\\xff'`` would read as
    another file's name, ``x`` and the byte 0xff).

    One regular-expression scan (no Python loop over the characters).
    """
    return _NEEDS_QUOTING.search(path) is not None


def display_path(path: str) -> str:
    """``path`` as printable text that round-trips.

    A name that is valid UTF-8 without control characters is shown as it is.
    Any other name is shown in the shell's ANSI-C quoting, ``$'...'``, as GNU
    ``ls`` does: undecodable bytes (carried as surrogate escapes, see
    :func:`os.fsdecode`) become ``\\xNN`` and control characters ``\\n``, ``\\t``,
    ``\\xNN``; pasting the result into bash gives the original bytes back.
    """
    if not needs_quoting(path):
        return path
    out = []
    for c in path:
        o = ord(c)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o in _CONTROL:
            out.append(_CONTROL[o])
        elif c in "\\'":
            out.append("\\" + c)
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"
