"""Local parallelism: forked worker processes that share the work with this one.

With ``jobs`` cores, ``jobs - 1`` workers are forked and this process works
too, so that no core idles and no extra interpreter is paid for (each Python
process costs its own resident memory). Workers are forked early, while this
process is small, and exchange only compact values (columns, indices).

A worker that dies (the OOM killer, a signal) breaks the pool: every task
still in flight, and any later one, raises :class:`sif.errors.WorkerDied`
instead of waiting forever. A worker that dies while it writes a result
leaves part of a message in the results' pipe, which the executor's thread
would wait to complete for ever (this process holds a write end of that pipe
too): whoever waits for a task looks every :data:`WATCH_S` s, and once a
worker has been dead :data:`GRACE_S` s with the pool not yet broken, the pool
ends every worker and closes this process's write end (the read ends: the
pool is broken). Shutting the pool down with ``cancel`` does the same, as its
SIGTERM may stop a worker in the middle of a result. Workers ignore SIGINT: Ctrl-C reaches the whole
process group, and only this process stops the run (its caller shuts the
pool down, which ends the workers).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from sif.errors import WorkerDied

T = TypeVar("T")
R = TypeVar("R")

#: Seconds between two looks at the workers by whoever waits for a task.
WATCH_S = 0.5
#: Seconds a worker may be dead before the pool is taken for stuck (its executor
#: notices a death at once unless it waits for the rest of a message).
GRACE_S = 2.0
#: Seconds workers are given to end after SIGTERM, before SIGKILL.
END_S = 5.0


def _ignore_sigint(parent: int = 0) -> None:
    """A worker's start: it ignores SIGINT (the parent handles a Ctrl-C) and, given its
    ``parent``'s pid, ends when that process dies: a SIGKILLed ``sif index`` left its
    workers blocked on their pipes for good, holding the caller's stdout (a ``| cat``
    waited ten minutes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if parent:
        _end_with(parent)


def _end_with(parent: int) -> None:
    """SIGKILL for this process when the thread that forked it ends (``PR_SET_PDEATHSIG``,
    Linux), or at once if ``parent`` has ended already."""
    import ctypes
    import os

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pipes' EOF is all there is
        return
    if os.getppid() != parent:  # it died before the call: no signal will come
        os._exit(1)


def _nothing() -> None:
    """The task that makes the pool fork its workers."""


class Task(Generic[R]):
    """A task submitted to a :class:`WorkerPool`: a future whose worker may die."""

    __slots__ = ("_future", "_pool")

    def __init__(self, future: Future[R], pool: WorkerPool) -> None:
        self._future = future
        self._pool = pool

    def done(self) -> bool:
        """Whether the result (or its error) is there; never blocks."""
        return self._future.done()

    def add_done_callback(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` when the task ends (at once if it has), in whatever thread ends it."""
        self._future.add_done_callback(lambda _: fn())

    def result(self) -> R:
        """The task's value; raises what it raised, or :class:`WorkerDied`."""
        try:
            while not futures_wait([self._future], timeout=WATCH_S).done:
                self._pool.watch()
            return self._future.result()
        except BrokenProcessPool:
            raise self._pool.died() from None


class WorkerPool:
    """``processes`` forked workers (a :class:`ProcessPoolExecutor` that forks them all now).

    ``submit(func, *args)`` gives a :class:`Task` (``done()``, ``result()``);
    ``shutdown()`` ends the workers, killing those still at work unless
    ``cancel=False`` (then they finish what they hold). Also a context manager.
    """

    def __init__(self, processes: int) -> None:
        self.processes = processes
        import os

        # The signal comes when the forking *thread* ends: only the main thread's
        # workers take it (a pool made in a passing thread would lose its workers).
        main = threading.current_thread() is threading.main_thread()
        self._executor = ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_ignore_sigint,
            initargs=(os.getpid() if main else 0,),
        )
        self._workers: list[Any] = []
        self._dead_since: float | None = None
        self._unstuck = False
        # A fork context forks every worker at the first submit: do it now, while
        # this process holds no lock and no open index. SIGINT stays blocked
        # until the workers ignore it (a Ctrl-C then reaches this process only).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                self._executor.submit(_nothing).result()
            finally:
                # The worker processes, to tell how one died (the executor keeps no
                # record), and to end them should this raise.
                self._workers = list(getattr(self._executor, "_processes", {}).values())
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a Ctrl-C lands here
        except BaseException:
            self.shutdown()  # no caller holds the pool yet: its workers end here
            raise

    def submit(self, func: Callable[..., R], /, *args: Any) -> Task[R]:
        try:
            return Task(self._executor.submit(func, *args), self)
        except BrokenProcessPool:
            raise self.died() from None

    def died(self) -> WorkerDied:
        """The error for a pool broken by a worker's death, with how it died if known."""
        # A broken pool ends all its workers, which the executor's thread reaps: wait
        # a little for their exit codes (read while that thread reaps, one reads None).
        deadline = time.monotonic() + 2
        while any(p.exitcode is None for p in self._workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        codes = [p.exitcode for p in self._workers]
        # Once one worker died, the executor terminates the others (SIGTERM).
        killed = [c for c in codes if c is not None and c < 0]
        killed.sort(key=lambda c: c == -signal.SIGTERM)
        exited = [c for c in codes if c is not None and c > 0]
        if killed:
            how = f"killed by signal {-killed[0]}"
            if -killed[0] == signal.SIGKILL:
                how += ": out of memory?"
            else:
                with contextlib.suppress(ValueError):  # a signal without a name
                    how += f" ({signal.Signals(-killed[0]).name})"
            return WorkerDied(f"a worker process died ({how})")
        if exited:
            return WorkerDied(f"a worker process died (exit status {exited[0]})")
        return WorkerDied("a worker process died")

    def shutdown(self, cancel: bool = True) -> None:
        """End the workers and wait for them: at once with ``cancel``, else after their tasks."""
        if cancel:
            self._unstick()
        self._executor.shutdown(wait=True, cancel_futures=cancel)

    def watch(self) -> None:
        """Called now and then by whoever waits for a task: a worker dead for
        :data:`GRACE_S` s while a task is still awaited ends the pool (:meth:`_unstick`),
        whose tasks then raise :class:`WorkerDied` (a broken pool's have already)."""
        if self._unstuck:
            return
        if not multiprocessing.connection.wait([p.sentinel for p in self._workers], timeout=0):
            return
        now = time.monotonic()
        if self._dead_since is None:
            self._dead_since = now
        elif now - self._dead_since >= GRACE_S:
            self._unstick()

    def _unstick(self) -> None:
        """End every worker (SIGTERM, then SIGKILL after :data:`END_S` s), wait until each
        has exited, then close this process's write end of the results' pipe: a read of a
        message that a dead worker left half written ends (EOF) and the executor takes the
        pool for broken, instead of waiting for the rest for ever."""
        if self._unstuck:
            return
        self._unstuck = True
        results = getattr(self._executor, "_result_queue", None)
        writer = getattr(results, "_writer", None)
        try:
            for p in self._workers:
                if p.exitcode is None:
                    p.terminate()
            pending = [p.sentinel for p in self._workers]
            deadline = time.monotonic() + END_S
            while pending:
                left = deadline - time.monotonic()
                ready = multiprocessing.connection.wait(pending, timeout=max(0.0, left))
                pending = [s for s in pending if s not in ready]
                if pending and left <= 0:
                    for p in self._workers:
                        if p.sentinel in pending:
                            with contextlib.suppress(OSError):
                                p.kill()
                    deadline = time.monotonic() + END_S
        finally:
            # Even when interrupted (a second Ctrl-C) while a worker is slow to die: the
            # pipe reaches its end only once every worker has exited, so closing early
            # is safe, and a later shutdown, which does not come here again, cannot hang.
            if writer is not None:
                with contextlib.suppress(OSError):
                    writer.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def fork_pool(jobs: int) -> WorkerPool | None:
    """A pool of ``jobs - 1`` forked workers, or ``None`` for one job or no ``fork``."""
    if jobs < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return WorkerPool(jobs - 1)


def shared_map(
    func: Callable[[T], R],
    items: Iterable[T],
    pool: WorkerPool | None,
    local: Callable[[T], R] | None = None,
    *,
    share: bool = True,
    depth: int = 2,
) -> Iterator[tuple[int, R]]:
    """``(index, func(item))`` for every item, in completion order.

    Each worker of ``pool`` holds ``depth`` items (the one it runs and those
    queued behind it), refilled by a thread of this process the moment one
    ends; this process runs the rest itself with ``local`` (default
    ``func``), so the work balances between them. Before the thread, a
    worker's items were refilled only when this process came back from one
    of its own, and a worker done with them idled until then (on 1 GB of
    Linux sources, 1.3 and 3.5 s of a 25 s exact pass). Large items want a
    ``depth`` of 1: the last items queued at a worker are the pass's tail,
    run on one core while this process has nothing left.

    With ``share`` false this process only hands items out and collects (a
    coordinator: for a pool of one worker per core, when the caller has work
    of its own with the results), two a worker in flight, the oldest first.
    Items are drawn from ``items`` only as they are needed, one at a time.
    With ``pool`` ``None``, everything runs here, in order. Raises
    :class:`sif.errors.WorkerDied` when a worker dies.
    """
    run_here = local or func
    it = enumerate(items)
    if pool is None:
        for i, item in it:
            yield i, run_here(item)
        return
    if not share:
        waiting: deque[tuple[int, Task[R]]] = deque()
        for i, item in it:
            waiting.append((i, pool.submit(func, item)))
            while len(waiting) >= 2 * pool.processes or (waiting and waiting[0][1].done()):
                j, task = waiting.popleft()
                yield j, task.result()
        while waiting:
            j, task = waiting.popleft()
            yield j, task.result()
        return
    feed = _Feed(func, it, pool, depth * pool.processes)
    yielded = 0
    try:
        while True:
            got = feed.ready()
            while got is not None:
                yielded += 1
                yield got[0], got[1].result()
                got = feed.ready()
            nxt = feed.take()
            if nxt is not None:
                yield nxt[0], run_here(nxt[1])
                continue
            if feed.all_submitted(yielded):
                return
            got = feed.wait()
            if got is not None:
                yielded += 1
                yield got[0], got[1].result()
    finally:
        feed.close()


_END = object()  # the feeder found no more items


class _Feed(Generic[T, R]):
    """The items of one :func:`shared_map`: drawn one at a time under a lock, by this
    process's own thread (to run here) or by a feeder thread that keeps ``depth`` of
    them submitted to the pool, one more each time one ends. Results come through
    :attr:`finished` as they end."""

    def __init__(
        self, func: Callable[[T], R], items: Iterator[tuple[int, T]], pool: WorkerPool, depth: int
    ) -> None:
        self._func, self._items, self._pool = func, items, pool
        self._lock = threading.Lock()
        self._exhausted = False
        self._submitted = 0
        self._stopped = False
        self._error: BaseException | None = None
        self._slots = threading.Semaphore(0)
        self._finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(depth):
            if not self._submit_next():
                break
        self._thread = threading.Thread(target=self._feed, name="sif-feed", daemon=True)
        self._thread.start()

    def _next(self) -> tuple[int, T] | None:
        if self._exhausted:
            return None
        nxt = next(self._items, None)
        if nxt is None:
            self._exhausted = True
        return nxt

    def take(self) -> tuple[int, T] | None:
        """The next item, to run here; ``None`` when there is none."""
        with self._lock:
            return self._next()

    def _submit_next(self) -> bool:
        with self._lock:
            if self._stopped:
                return False
            nxt = self._next()
            if nxt is None:
                return False
            task = self._pool.submit(self._func, nxt[1])
            self._submitted += 1
        i = nxt[0]
        task.add_done_callback(lambda: self._ended(i, task))
        return True

    def _ended(self, i: int, task: Task[R]) -> None:
        self._finished.put((i, task))
        self._slots.release()

    def _feed(self) -> None:
        try:
            while True:
                self._slots.acquire()
                if not self._submit_next():
                    break
        except BaseException as e:  # a broken pool, an item that failed to be made
            self._error = e
        self._finished.put(_END)

    def _message(self, got: Any) -> tuple[int, Task[R]] | None:
        if got is _END:
            if self._error is not None:
                raise self._error
            return None
        return got

    def ready(self) -> tuple[int, Task[R]] | None:
        """A task that ended, if one did; never blocks."""
        while True:
            try:
                got = self._message(self._finished.get_nowait())
            except queue.Empty:
                return None
            if got is not None:
                return got

    def wait(self) -> tuple[int, Task[R]] | None:
        """The next task to end (``None``: the feeder stopped; look again)."""
        while True:
            try:
                return self._message(self._finished.get(timeout=WATCH_S))
            except queue.Empty:
                self._pool.watch()

    def all_submitted(self, yielded: int) -> bool:
        """Whether the items are all drawn and the ``yielded`` results are all of them."""
        if self._error is not None:
            raise self._error
        with self._lock:
            return self._exhausted and yielded == self._submitted

    def close(self) -> None:
        """Submit nothing more (the feeder ends at its next wake)."""
        with self._lock:
            self._stopped = True
        self._slots.release()
