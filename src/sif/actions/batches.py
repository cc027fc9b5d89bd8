"""A plan's steps cut into batches: each re-checked, journaled with one fsync, then run.

A batch ends before a step that touches an inode an earlier step of the same
batch changes (the later step's re-check must see what the earlier one left).
While one batch runs, :class:`sif.actions.run.Runner` re-checks the next one
in a thread of its own when the two touch no inode in common, so the first
batch is kept small: it is the only one re-checked before any step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

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


def batches(
    steps: Iterable[Step], size: int, on_noop: Callable[[], None]
) -> Iterator[tuple[list[Step], set[Key]]]:
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
            yield batch, drops | keeps
            batch, drops, keeps = [], set(), set()
            limit = size
        batch.append(step)
        drops.add(d)
        keeps.add(k)
    if batch:
        yield batch, drops | keeps
