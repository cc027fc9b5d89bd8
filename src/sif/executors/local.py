"""Local parallelism: forked worker processes that share the work with this one.

With ``jobs`` cores, ``jobs - 1`` workers are forked and this process works
too, so that no core idles and no extra interpreter is paid for (each Python
process costs its own resident memory). Workers are forked early, while this
process is small, and exchange only compact values (columns, indices).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def fork_pool(jobs: int) -> Any:
    """A pool of ``jobs - 1`` forked workers, or ``None`` for one job or no ``fork``."""
    if jobs < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork").Pool(jobs - 1)


def shared_map(
    func: Callable[[T], R],
    items: Iterable[T],
    pool: Any,
    local: Callable[[T], R] | None = None,
) -> Iterator[tuple[int, R]]:
    """``(index, func(item))`` for every item, in completion order.

    Each worker of ``pool`` keeps two items queued; this process runs the
    rest itself with ``local`` (default ``func``), so the work balances
    between them. Items are drawn from ``items`` only as they are needed.
    With ``pool`` ``None``, everything runs here, in order.
    """
    run_here = local or func
    it = enumerate(items)
    if pool is None:
        for i, item in it:
            yield i, run_here(item)
        return
    queued = 2 * pool._processes
    inflight: deque[tuple[int, Any]] = deque()
    exhausted = False
    while True:
        while not exhausted and len(inflight) < queued:
            nxt = next(it, None)
            if nxt is None:
                exhausted = True
            else:
                inflight.append((nxt[0], pool.apply_async(func, (nxt[1],))))
        while inflight and inflight[0][1].ready():
            i, res = inflight.popleft()
            yield i, res.get()
        nxt = None if exhausted else next(it, None)
        if nxt is not None:
            yield nxt[0], run_here(nxt[1])
        elif inflight:
            i, res = inflight.popleft()
            yield i, res.get()
        else:
            return
