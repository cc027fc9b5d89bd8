"""What ``sif explain`` shows: the two panes of an :class:`~sif.explain.Explanation`.

:func:`pane` turns one file of the pair into display rows: the lines that
hold a passage (each cut into pieces, a piece tagged with the passage it
belongs to), ``context`` lines around them, and the rest elided with a
count. A passage longer than ``passage_lines`` lines shows its first and last
lines, and a pane stops after ``max_rows`` rows (saying what it left out):
the display stays small whatever the files; ``--format json`` has every
passage. A binary file shows each passage as its offsets and a hex excerpt.

:func:`write_text` prints both panes side by side (colours: ANSI, one per
passage, the same in both panes; without colour the passage number marks a
line), :func:`write_json` one record per passage then the summary. The
HTML page is :mod:`sif.html.explain`. No click, no rich: plain strings.
"""

from __future__ import annotations

import heapq
import itertools
import json
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from sif.events import display_path
from sif.passages import ExplainedFile, Explanation, newline_positions

#: Lines of context shown around each passage (``--context``).
DEFAULT_CONTEXT = 3
#: Lines of one passage shown before its middle is elided.
PASSAGE_LINES = 40
#: Rows of a pane at most.
MAX_ROWS = 4000
#: Bytes of a binary passage shown in hex.
HEX_BYTES = 32

Piece = tuple[str, int, tuple[int, ...]]  # text, its colour passage (0: none), all covering it


@dataclass(frozen=True)
class Row:
    """A line (``line`` >= 1, its ``pieces``) or an elision (``line`` 0, ``skipped`` lines
    or bytes, ``note`` says what)."""

    line: int
    pieces: tuple[Piece, ...] = ()
    skipped: int = 0
    note: str = ""
    binary: bool = False  # a passage of a binary file: no line number


def _intervals(expl: Explanation, side: str) -> tuple[Any, Any, Any]:
    col = (0, 1) if side == "a" else (2, 3)
    rows = [(p.a_start, p.a_end, p.b_start, p.b_end, p.id) for p in expl.passages]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
    order = np.lexsort((arr[:, 4], arr[:, col[0]]))
    return arr[order, col[0]], arr[order, col[1]], arr[order, 4]


def pane(
    expl: Explanation,
    side: str,
    context: int = DEFAULT_CONTEXT,
    passage_lines: int = PASSAGE_LINES,
    max_rows: int = MAX_ROWS,
) -> list[Row]:
    """The display rows of file ``side`` (``"a"`` or ``"b"``) of ``expl`` (kept content)."""
    data = expl.content[0 if side == "a" else 1]
    info: ExplainedFile = expl.a if side == "a" else expl.b
    starts, ends, ids = _intervals(expl, side)
    if info.kind != "text":
        return _binary_pane(data, starts, ends, ids, max_rows)
    data = np.asarray(data, dtype=np.uint8)
    nl = newline_positions(data)
    n_lines = len(nl) + int(len(data) > 0 and data[-1] != 10)
    if n_lines == 0:
        return []
    line_start = np.concatenate(([0], nl + 1))[:n_lines]
    line_end = np.concatenate((nl, [len(data)]))[:n_lines]
    first = np.searchsorted(nl, starts, side="left")
    last = np.searchsorted(nl, ends - 1, side="left")
    # Lines holding a passage, then those around them (a difference array, no loop per line).
    mark = np.zeros(n_lines + 1, dtype=np.int64)
    np.add.at(mark, first, 1)
    np.add.at(mark, last + 1, -1)
    shared = np.cumsum(mark)[:n_lines] > 0
    shown = shared.copy()
    if context > 0 and shared.any():
        c = np.concatenate(([0], np.cumsum(shared)))
        lo = np.clip(np.arange(n_lines) - context, 0, n_lines)
        hi = np.clip(np.arange(n_lines) + context + 1, 0, n_lines)
        shown = (c[hi] - c[lo]) > 0
    hidden_middle = np.zeros(n_lines + 1, dtype=np.int64)
    long = (last - first + 1) > passage_lines
    if long.any():
        half = passage_lines // 2
        np.add.at(hidden_middle, first[long] + half, 1)
        np.add.at(hidden_middle, last[long] + 1 - half, -1)
        cut = np.cumsum(hidden_middle)[:n_lines] > 0
        # A line that starts or ends another passage stays visible.
        keep = np.zeros(n_lines, dtype=bool)
        keep[first] = True
        keep[last] = True
        shown &= ~(cut & ~keep)
    sweep = _Sweep(starts.tolist(), ends.tolist(), ids.tolist())
    rows: list[Row] = []
    k = 0
    while k < n_lines:
        if len(rows) >= max_rows:
            rows.append(Row(0, skipped=n_lines - k, note="lines not shown (row limit)"))
            break
        if not shown[k]:
            j = k
            while j < n_lines and not shown[j]:
                j += 1
            what = "shared lines" if shared[k:j].all() else "lines"
            rows.append(Row(0, skipped=j - k, note=what))
            k = j
            continue
        ls, le = int(line_start[k]), int(line_end[k])
        rows.append(Row(k + 1, _pieces(data, ls, le, sweep.over(ls, le + 1))))
        k += 1
    return rows


class _Sweep:
    """The passages over each line, lines taken in order: a heap of the passages begun,
    by end (each passage is pushed and popped once: no scan per line)."""

    def __init__(self, starts: list[int], ends: list[int], ids: list[int]) -> None:
        self.items = sorted(zip(starts, ends, ids, strict=True))
        self.next = 0
        self.active: list[tuple[int, int, int]] = []  # (end, start, id)

    def over(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """(start, end, id) of the passages meeting ``[lo, hi)``; ``lo`` never decreases."""
        items = self.items
        while self.next < len(items) and items[self.next][0] < hi:
            s, e, p = items[self.next]
            heapq.heappush(self.active, (e, s, p))
            self.next += 1
        while self.active and self.active[0][0] <= lo:
            heapq.heappop(self.active)
        return [(s, e, p) for e, s, p in self.active]


def _pieces(data: Any, ls: int, le: int, over: list[tuple[int, int, int]]) -> tuple[Piece, ...]:
    """The pieces of the line ``[ls, le)`` (its newline at ``le``, if any, counts for the
    passages over it), each with every passage covering it, coloured by the lowest."""
    if not over:
        return ((_decode(data[ls:le]), 0, ()),)
    if le == ls:  # an empty line inside a passage
        every = tuple(sorted({p for _, _, p in over}))
        return (("", every[0], every),)
    spans = [(max(s, ls), min(e, le), p) for s, e, p in over if s < le]
    cuts = sorted({ls, le, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    # A sweep over the cuts: the passages over [x, y) are those begun at x or before and
    # not ended by x (no cut lies inside). Asking each piece of every span was O(P^2) a
    # line: a 10 MB file of one line and 10 k passages took 8 s, 100 MB 200 s.
    by_start = sorted(spans, key=lambda t: t[0])
    by_end = sorted(spans, key=lambda t: t[1])
    active: dict[int, int] = {}
    i = j = 0
    out: list[Piece] = []
    for x, y in itertools.pairwise(cuts):
        while i < len(by_start) and by_start[i][0] <= x:
            p = by_start[i][2]
            active[p] = active.get(p, 0) + 1
            i += 1
        while j < len(by_end) and by_end[j][1] <= x:
            p = by_end[j][2]
            active[p] -= 1
            if not active[p]:
                del active[p]
            j += 1
        if y <= x:
            continue
        every = tuple(sorted(active))
        text = _decode(data[x:y])
        if out and out[-1][2] == every:
            out[-1] = (out[-1][0] + text, out[-1][1], every)
        else:
            out.append((text, every[0] if every else 0, every))
    return tuple(out) or (("", 0, ()),)


def _decode(chunk: Any) -> str:
    text = bytes(chunk).decode("utf-8", "replace").expandtabs(4)
    return (
        "".join(ch if ch.isprintable() else "\ufffd" for ch in text)
        if not text.isprintable()
        else text
    )


def _binary_pane(data: Any, starts: Any, ends: Any, ids: Any, max_rows: int) -> list[Row]:
    rows: list[Row] = []
    prev = 0
    for s, e, p in zip(starts.tolist(), ends.tolist(), ids.tolist(), strict=True):
        if len(rows) >= max_rows:
            rows.append(Row(0, skipped=len(starts) - len(rows), note="passages not shown"))
            break
        if s > prev:
            rows.append(Row(0, skipped=s - prev, note="bytes"))
        excerpt = bytes(data[s : min(e, s + HEX_BYTES)]).hex(" ")
        more = "…" if e - s > HEX_BYTES else ""
        rows.append(Row(s + 1, ((f"@{s:#x} +{e - s}: {excerpt}{more}", p, (p,)),), binary=True))
        prev = max(prev, e)
    if len(data) > prev:
        rows.append(Row(0, skipped=len(data) - prev, note="bytes"))
    return rows


# --- text -------------------------------------------------------------------------

#: Background colours of passages (xterm 256): distinct, readable under black text.
PALETTE = (153, 186, 223, 218, 151, 229, 183, 117, 216, 157, 195, 225)


def summary_lines(expl: Explanation) -> list[str]:
    a, b = expl.a, expl.b
    longest = expl.longest
    lines = [
        f"A {display_path(a.path)} ({a.kind}, {a.view} view, {a.size:,} bytes)",
        f"B {display_path(b.path)} ({b.kind}, {b.view} view, {b.size:,} bytes)",
        f"{len(expl.passages):,} shared passages of at least {expl.window} bytes; "
        f"{expl.shared_windows:,} distinct shared windows",
        f"A in B {100 * expl.a_in_b:.1f}%  B in A {100 * expl.b_in_a:.1f}%  "
        f"(share of each file's distinct {expl.window}-byte windows found in the other)",
        f"covered: A {100 * a.coverage:.1f}% ({a.covered:,} bytes), "
        f"B {100 * b.coverage:.1f}% ({b.covered:,} bytes); "
        f"gaps: A {len(a.gaps):,} ({a.size - a.covered:,} bytes), "
        f"B {len(b.gaps):,} ({b.size - b.covered:,} bytes)",
    ]
    if min(a.size, b.size) < expl.window:
        lines.append(f"note: a file under {expl.window} bytes has no window to share")
    if longest is not None:
        lines.append(f"longest: passage {longest.id}, {longest.length:,} bytes{_where(longest)}")
    for side in (a, b):
        if not side.mapped:
            lines.append(
                f"note: {display_path(side.path)}: offsets and lines are those of the "
                f"{side.view} view "
                "(it keeps no map to the original lines)"
            )
    return lines


def _where(p: Any) -> str:
    if p.a_lines is None:
        return f" (A @{p.a_start:#x}, B @{p.b_start:#x})"
    return f" (A lines {p.a_lines[0]}-{p.a_lines[1]}, B lines {p.b_lines[0]}-{p.b_lines[1]})"


def _cell(row: Row | None, width: int, colour: bool) -> str:
    if row is None:
        return " " * width
    if row.line == 0:
        text = f"  ··· {row.skipped:,} {row.note} ···"
        text = text[:width].ljust(width)
        return f"\x1b[2m{text}\x1b[0m" if colour else text
    pid = next((p for _, p, _ in row.pieces if p), 0)
    number = " " * 6 if row.binary else f"{row.line:>6}"
    gutter = f"{number} " + (f"{pid:>3} " if pid and not colour else "    ")
    room = width - len(gutter)
    out, used = [], 0
    for text, p, _ in row.pieces:
        piece = text[: max(0, room - used)]
        used += len(piece)
        if colour and p:
            out.append(f"\x1b[30;48;5;{PALETTE[(p - 1) % len(PALETTE)]}m{piece}\x1b[0m")
        else:
            out.append(piece)
    return gutter + "".join(out) + " " * max(0, room - used)


def write_text(
    expl: Explanation,
    out: IO[str],
    context: int = DEFAULT_CONTEXT,
    width: int = 160,
    colour: bool = False,
) -> None:
    """The summary, the passage list, then both files side by side."""
    for line in summary_lines(expl):
        out.write(line + "\n")
    for p in expl.passages[:MAX_ROWS]:
        out.write(
            f"  passage {p.id}: A [{p.a_start}, {p.a_end}) B [{p.b_start}, {p.b_end}) "
            f"{p.length:,} bytes{_where(p)}\n"
        )
    if len(expl.passages) > MAX_ROWS:
        out.write(f"  ... {len(expl.passages) - MAX_ROWS:,} more passages (--format json)\n")
    if not expl.passages:
        return
    left, right = pane(expl, "a", context), pane(expl, "b", context)
    half = max(20, (width - 3) // 2)
    out.write(
        "\n"
        + f"A {display_path(expl.a.path)}"[:half].ljust(half)
        + " │ "
        + f"B {display_path(expl.b.path)}"[:half]
        + "\n"
    )
    for k in range(max(len(left), len(right))):
        l_row = left[k] if k < len(left) else None
        r_row = right[k] if k < len(right) else None
        out.write(_cell(l_row, half, colour) + " │ " + _cell(r_row, half, colour).rstrip() + "\n")


def write_json(expl: Explanation, out: IO[str]) -> None:
    """One json record per passage, then one summary record (``"summary": true``)."""
    for p in expl.passages:
        out.write(json.dumps(p.to_dict()) + "\n")
    out.write(json.dumps(expl.summary()) + "\n")
