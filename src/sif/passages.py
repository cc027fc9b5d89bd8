"""The exact shared passages of two files: what ``sif explain`` shows.

The windows are those of the exact score (every ``window``-byte substring,
valued by :func:`sif.core.rolling.window_hashes`). A *passage* is a maximal
run of consecutive shared windows on one diagonal (the same bytes at
``a_start`` in A and ``b_start`` in B), merged into one byte range per file:
``[a_start, a_end)`` and ``[b_start, b_end)``, end exclusive, ``a_end -
a_start == b_end - b_start >= window``. Passages may come in another order
in B than in A, and one passage of A may occur several times in B (and the
converse): each occurrence is a passage. Every shared window of either file
lies in some passage.

The summary: C(A,B) and C(B,A) over distinct windows, exactly the values of
:func:`sif.similar.exact_containment` of the two window sets; the longest
passage; the share of each file's bytes covered by passages; the gaps (the
byte ranges of each file in no passage).

Content views (:mod:`sif.content`) apply as in the index: a member of an
archive is named ``a.zip!/x``, a compressed file is explained decompressed,
``normalize="markup"``/``"code"`` compare the normalised text. Offsets and
lines are in the terms of the content compared: for a plain file and for
the ``raw`` view of a member or a decompressed file they are those of its
bytes (``mapped``: true); the ``postscript``, ``markup``, ``code`` and
``elf-strings`` views keep no map to the original lines, so their offsets
and lines are the view's own (``mapped``: false).

Memory: the two contents (a plain file is read whole), a bit per
window of each, and ``budget`` bytes of collected windows
(:func:`sif.core.matches.shared_windows`); no per-byte Python loop.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError, InputError
from sif.events import ScanWarning, WarningSink, display_path, ignore_warning

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

#: The window of the exact score (Manber's 50 bytes).
DEFAULT_WINDOW = 50
#: Views whose offsets are those of the compared content's own bytes.
MAPPED_VIEWS = ("raw",)


@dataclass(frozen=True)
class Passage:
    """One shared passage: the same bytes at ``[a_start, a_end)`` in A and ``[b_start, b_end)``
    in B. ``a_lines``/``b_lines``: first and last line (1-based) for text, else ``None``."""

    id: int
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    a_lines: tuple[int, int] | None = None
    b_lines: tuple[int, int] | None = None

    @property
    def length(self) -> int:
        return self.a_end - self.a_start

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "passage": self.id,
            "a_start": self.a_start,
            "a_end": self.a_end,
            "b_start": self.b_start,
            "b_end": self.b_end,
            "length": self.length,
        }
        if self.a_lines is not None and self.b_lines is not None:
            d["a_lines"] = list(self.a_lines)
            d["b_lines"] = list(self.b_lines)
        return d


@dataclass(frozen=True)
class ExplainedFile:
    """One file of the pair: its path, kind, view, content size, distinct windows,
    bytes covered by passages, gaps (``[start, end)`` ranges in no passage)."""

    path: str
    kind: str
    view: str
    mapped: bool
    size: int
    windows: int
    covered: int
    gaps: tuple[tuple[int, int], ...]
    lines: int | None = None

    @property
    def coverage(self) -> float:
        return self.covered / self.size if self.size else 0.0

    def to_dict(self) -> dict[str, Any]:
        largest = max((e - s for s, e in self.gaps), default=0)
        return {
            "path": self.path,
            "kind": self.kind,
            "view": self.view,
            "mapped": self.mapped,
            "size": self.size,
            "lines": self.lines,
            "windows": self.windows,
            "covered": self.covered,
            "coverage": self.coverage,
            "gaps": len(self.gaps),
            "gap_bytes": self.size - self.covered,
            "largest_gap": largest,
            "gap_ranges": [list(g) for g in self.gaps],
        }


@dataclass(frozen=True)
class Explanation:
    """The passages two files share and the summary (see the module's text)."""

    a: ExplainedFile
    b: ExplainedFile
    window: int
    passages: tuple[Passage, ...]
    shared_windows: int
    a_in_b: float
    b_in_a: float
    seconds: float
    warnings: tuple[ScanWarning, ...] = ()
    #: The two contents compared (uint8 arrays) when asked for (``keep_content``).
    content: tuple[Any, Any] = field(default=(b"", b""), repr=False, compare=False)

    @property
    def longest(self) -> Passage | None:
        return max(self.passages, key=lambda p: (p.length, -p.id), default=None)

    def summary(self) -> dict[str, Any]:
        longest = self.longest
        return {
            "summary": True,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "window": self.window,
            "passages": len(self.passages),
            "shared_windows": self.shared_windows,
            "a_in_b": self.a_in_b,
            "b_in_a": self.b_in_a,
            "longest": None if longest is None else longest.to_dict(),
            "seconds": round(self.seconds, 3),
        }


# --- reading the two contents --------------------------------------------------------


@dataclass
class _Content:
    """A content to compare; a plain file's bytes are read when first asked for
    (:attr:`data`), once its kind is known: two files of different kinds are refused
    before either is read whole."""

    path: str
    kind: str
    view: str
    mapped: bool
    loaded: U8 | None = None
    load: Callable[[], U8] | None = field(default=None, repr=False)

    @property
    def data(self) -> U8:
        if self.loaded is None:
            assert self.load is not None
            self.loaded = self.load()
            self.load = None
        return self.loaded


def _origin(path: str) -> str:
    """The file on disk that holds ``path`` (itself, or the archive of ``a.zip!/x``)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ConfigError(f"{display_path(path)}: {exc.strerror or exc}") from None
    if st is None:
        cut = path.find("!/")
        while cut > 0:
            head = path[:cut]
            try:
                if stat.S_ISREG(os.stat(head).st_mode):
                    return head
            except OSError:
                pass
            cut = path.find("!/", cut + 2)
        raise ConfigError(f"{display_path(path)}: no such file or directory")
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{display_path(path)}: is a directory (explain compares two files)")
    if not stat.S_ISREG(st.st_mode):
        what = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise ConfigError(f"{display_path(path)}: {what}: not read")
    return path


#: Bytes a pseudo-file (:func:`_read_whole`) may hold past the size it lists.
PSEUDO_MAX_BYTES = 64 << 20


def _read_whole(fd: int, st: os.stat_result, path: str) -> U8:
    """The content of the open file ``fd`` (``st``: its ``fstat`` when opened), read into
    memory, or :class:`InputError` when it holds other than its size: it changed since.

    A pseudo-file lists a size that is not its content's: ``/proc`` lists 0, ``/sys``
    4096 for a line. One whose ``fstat`` is still ``st`` once read (size, mtime and
    ctime: ``touch -r`` puts an mtime back, never a ctime) did not change: its content
    is what it read, to its end (at most :data:`PSEUDO_MAX_BYTES` past its size).

    Read, not mapped: a mapped file cut short by another process while it is compared
    ended the run with SIGBUS at the first page past its new end. Memory: the file's
    size, in the process's own pages (a mapping's were the page cache's).
    """
    shown = display_path(path)
    size = st.st_size
    with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
        try:
            arr = np.empty(size, dtype=np.uint8)
            view = arr.data
            total = 0
            while total < size and (n := f.readinto(view[total:])):
                total += n
            more = f.read(1) if total == size else b""
            if total == size and not more:
                return arr
            now = os.fstat(fd)
            same = (now.st_size, now.st_mtime_ns, now.st_ctime_ns)
            if same == (size, st.st_mtime_ns, st.st_ctime_ns):  # a pseudo-file
                if more:
                    more += f.read(PSEUDO_MAX_BYTES)
                    if len(more) > PSEUDO_MAX_BYTES:
                        raise InputError(
                            f"{shown}: lists {size:,} bytes and holds over "
                            f"{PSEUDO_MAX_BYTES:,}: not compared"
                        )
                    return np.concatenate([arr, np.frombuffer(more, dtype=np.uint8)])
                return arr[:total].copy()
        except OSError as exc:
            raise InputError(f"{shown}: {exc.strerror or exc}") from None
    got = f"{total:,}" if not more else f"over {size:,}"
    raise InputError(f"{shown}: changed while it was read ({got} bytes read, {size:,} listed)")


@contextmanager
def _opened(path: str, normalize: str, on_warning: WarningSink) -> Iterator[_Content]:
    """The content of ``path`` as compared: a plain file read, a view in memory."""
    from sif.content import ContentOptions, entries, kind_of
    from sif.fileio import open_regular

    origin = _origin(path)
    options = ContentOptions(normalize=normalize)
    chosen: tuple[Any, bytes | None, str, bool] | None = None
    seen = 0
    held: list[ScanWarning] = []
    for e in entries(origin, options=options, on_warning=held.append):
        seen += 1
        if e.path == path:
            view = str(e.view)
            mapped = e.view.name in MAPPED_VIEWS
            chosen = (e, None if e.file is not None else e.read(), view, mapped)
            break
    if seen == 0 and held:  # the file itself could not be read: that is the error
        raise InputError(str(held[0]))
    for w in held:
        on_warning(w)
    if chosen is None:
        if origin == path and seen:
            # An archive named as a whole: its bytes, raw (name a member with a.zip!/x).
            chosen = (None, None, "raw", True)
        elif origin != path:
            raise ConfigError(f"{display_path(path)}: no such member in {display_path(origin)}")
        else:
            raise InputError(f"{display_path(path)}: cannot be read")
    assert chosen is not None
    entry, data, view, mapped = chosen
    if data is not None and entry is not None:
        yield _Content(path, entry.kind, view, mapped, np.frombuffer(data, dtype=np.uint8))
        return
    try:
        fd, st = open_regular(origin)
    except OSError as exc:
        raise InputError(f"{display_path(path)}: {exc.strerror or exc}") from None
    try:
        from sif.content import SAMPLE_SIZE

        try:
            head = os.pread(fd, SAMPLE_SIZE, 0)
        except OSError as exc:
            raise InputError(f"{display_path(path)}: {exc.strerror or exc}") from None
        kind = entry.kind if entry is not None else kind_of(head)
        yield _Content(path, kind, view, mapped, load=lambda: _read_whole(fd, st, path))
    finally:
        os.close(fd)


# --- the computation ------------------------------------------------------------------


def _union(starts: I64, ends: I64, size: int) -> tuple[int, list[tuple[int, int]]]:
    """Bytes covered by the ranges ``[starts, ends)``, and the gaps in ``[0, size)``."""
    if len(starts) == 0:
        return 0, ([(0, size)] if size else [])
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    block_start = s[new]
    block_end = np.maximum.reduceat(e, np.flatnonzero(new))
    covered = int((block_end - block_start).sum())
    gap_s = np.concatenate(([0], block_end))
    gap_e = np.concatenate((block_start, [size]))
    keep = gap_e > gap_s
    return covered, list(zip(gap_s[keep].tolist(), gap_e[keep].tolist(), strict=True))


def _line_of(newlines: I64, offsets: I64) -> I64:
    """1-based line numbers of byte ``offsets`` (``newlines``: positions of ``\\n``)."""
    return np.searchsorted(newlines, offsets, side="left") + 1


def newline_positions(data: U8) -> I64:
    """Positions of every ``\\n`` in ``data`` (vectorised)."""
    return np.flatnonzero(data == 10).astype(np.int64)


def explain_arrays(
    a: U8, b: U8, window: int = DEFAULT_WINDOW, budget: int | None = None
) -> tuple[I64, int, int, int]:
    """The passages of two byte arrays: rows ``(a_start, b_start, length)`` sorted by
    ``a_start`` then ``b_start``, and ``(|S(A)|, |S(B)|, |S(A) ∩ S(B)|)``."""
    from sif.core.matches import DEFAULT_BUDGET, runs, shared_windows

    if window < 1:
        raise ConfigError("window must be positive")
    bits_a, bits_b, na, nb, common = shared_windows(a, b, window, budget or DEFAULT_BUDGET)
    if common == 0:
        return np.empty((0, 3), dtype=np.int64), na, nb, 0
    from sif.core.matches import THREADS_FROM

    if len(a) + len(b) >= THREADS_FROM:  # the kernels release the GIL: one side a thread
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            later = pool.submit(runs, b, a, bits_b, window)
            from_a = runs(a, b, bits_a, window)
            from_b = later.result()[:, [1, 0, 2]]
    else:
        from_a = runs(a, b, bits_a, window)
        from_b = runs(b, a, bits_b, window)[:, [1, 0, 2]]
    both = np.concatenate((from_a, from_b))
    both = np.unique(both, axis=0)  # sorted by a_start, b_start
    both[:, 2] += window - 1  # windows -> bytes
    return both, na, nb, common


def explain(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    normalize: str = "auto",
    window: int = DEFAULT_WINDOW,
    budget: int | None = None,
    on_warning: WarningSink = ignore_warning,
    keep_content: bool = False,
) -> Explanation:
    """The passages files ``a`` and ``b`` share, and the summary (:class:`Explanation`).

    ``a`` and ``b`` name files, or archive members (``a.zip!/dir/x``);
    ``normalize`` is a :class:`sif.content.ContentOptions` mode (``"auto"``,
    ``"markup"``, ``"code"``, ``"raw"``). Raises :class:`ConfigError` for a
    missing path, a directory, a FIFO or other special file (never opened),
    or two files of different kinds (text and binary); :class:`InputError`
    for a file that cannot be read. ``keep_content`` keeps both contents (as
    bytes) in ``Explanation.content`` for rendering. Cost: see the module.
    """
    t0 = time.perf_counter()
    pa, pb = os.fspath(a), os.fspath(b)
    warnings: list[ScanWarning] = []

    def warn(w: ScanWarning) -> None:
        warnings.append(w)
        on_warning(w)

    _origin(pa)  # both checked before either is read
    _origin(pb)
    with _opened(pa, normalize, warn) as ca, _opened(pb, normalize, warn) as cb:
        if ca.kind != cb.kind:
            raise ConfigError(
                f"{pa} is {ca.kind} and {pb} is {cb.kind}: only files of one kind are compared"
            )
        rows, na, nb, common = explain_arrays(ca.data, cb.data, window, budget)
        text = ca.kind == "text"
        a_lines = b_lines = None
        n_lines_a = n_lines_b = None
        if text:
            nl_a, nl_b = newline_positions(ca.data), newline_positions(cb.data)
            n_lines_a = len(nl_a) + int(len(ca.data) > 0 and ca.data[-1] != 10)
            n_lines_b = len(nl_b) + int(len(cb.data) > 0 and cb.data[-1] != 10)
            a_lines = np.stack(
                (_line_of(nl_a, rows[:, 0]), _line_of(nl_a, rows[:, 0] + rows[:, 2] - 1)), axis=1
            )
            b_lines = np.stack(
                (_line_of(nl_b, rows[:, 1]), _line_of(nl_b, rows[:, 1] + rows[:, 2] - 1)), axis=1
            )
        passages = tuple(
            Passage(
                k + 1,
                int(s),
                int(s + n),
                int(t),
                int(t + n),
                None if a_lines is None else (int(a_lines[k, 0]), int(a_lines[k, 1])),
                None if b_lines is None else (int(b_lines[k, 0]), int(b_lines[k, 1])),
            )
            for k, (s, t, n) in enumerate(rows.tolist())
        )
        cov_a, gaps_a = _union(rows[:, 0], rows[:, 0] + rows[:, 2], len(ca.data))
        cov_b, gaps_b = _union(rows[:, 1], rows[:, 1] + rows[:, 2], len(cb.data))
        content = (ca.data, cb.data) if keep_content else (b"", b"")
        side_a = ExplainedFile(
            pa, ca.kind, ca.view, ca.mapped, len(ca.data), na, cov_a, tuple(gaps_a), n_lines_a
        )
        side_b = ExplainedFile(
            pb, cb.kind, cb.view, cb.mapped, len(cb.data), nb, cov_b, tuple(gaps_b), n_lines_b
        )
    return Explanation(
        side_a,
        side_b,
        window,
        passages,
        common,
        common / na if na else 0.0,
        common / nb if nb else 0.0,
        time.perf_counter() - t0,
        tuple(warnings),
        content,
    )
