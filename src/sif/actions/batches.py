"""A plan's steps cut into batches: each re-checked, journaled with one fsync, then run.

A batch ends before a step that touches an inode an earlier step of the same
batch changes (the later step's re-check must see what the earlier one left).
While one batch runs, :class:`sif.actions.run.Runner` re-checks the next one
in a thread of its own when the next one's re-checks cannot depend on what
this one leaves (see :func:`overlap`), so the first batch is kept small: it
is the only one re-checked before any step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from sif.actions.lanes import Closer
from sif.actions.plan import Step

Key = tuple[int, int]
"""A file's (device, inode)."""

BATCH = 1024
"""Steps re-checked, then journaled with one fsync, then run: fsyncs are what a run waits on
(11.6 k files, 6.5 k steps, on a loaded disk: 0.3-0.45 s of fsyncs in batches of 128,
0.05-0.15 s in batches of 1024)."""

FIRST_BATCH = 128
"""Steps of a run's first batch at most: the only one re-checked before any step runs."""


def batch_size() -> int:
    """:data:`BATCH`, or fewer where the descriptor limit is low: a step holds two
    descriptors, so does a step of the next batch (re-checked meanwhile), and the
    dropped files' wait for :class:`Closer` (two batches behind)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return BATCH
    if soft == resource.RLIM_INFINITY:
        return BATCH
    return max(1, min(BATCH, (soft - 64) // (4 + 2 * Closer.BEHIND)))


class Batch(NamedTuple):
    steps: list[Step]
    drops: set[Key]
    """The inodes its steps drop (or move, or share extents into)."""
    keeps: set[Key]
    """The kept inodes."""


def overlap(cur: Batch, nxt: Batch) -> frozenset[Key] | None:
    """Whether ``nxt`` may be re-checked while ``cur`` runs: ``None`` if not, else the
    kept inodes the two share, whose ctime ``cur``'s steps change (a hard link is a new
    name of the kept inode) and nothing else: ``nxt`` re-checks them without their ctime,
    and :meth:`sif.actions.run.Runner._confirm` checks it once ``cur`` has settled.

    A group of many copies (a licence in a hundred directories) spans batches: its kept
    copy is in both (on bench/actions.py's tree, 1,718 of 5,942 steps were re-checked
    before their batch could run, not beside the one before)."""
    if cur.drops & nxt.drops or cur.drops & nxt.keeps or cur.keeps & nxt.drops:
        return None
    return frozenset(cur.keeps & nxt.keeps)


def batches(steps: Iterable[Step], size: int, on_noop: Callable[[], None]) -> Iterator[Batch]:
    """``steps`` in batches of ``size`` at most (the first :data:`FIRST_BATCH`), each with
    the inodes it touches; a no-op step is left out and told to ``on_noop``."""
    batch: list[Step] = []
    drops: set[Key] = set()
    keeps: set[Key] = set()
    limit = min(FIRST_BATCH, size)
    for step in steps:
        if step.noop is not None:
            on_noop()
            continue
        d, k = step.drop.key, step.keep.key
        if len(batch) >= limit or d in drops or d in keeps or k in drops:
            yield Batch(batch, drops, keeps)
            batch, drops, keeps = [], set(), set()
            limit = size
        batch.append(step)
        drops.add(d)
        keeps.add(k)
    if batch:
        yield Batch(batch, drops, keeps)
