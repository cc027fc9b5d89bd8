"""The threads of a run: a batch's steps in a few lanes at once, and the dropped files' closes.

The reads and the file-system calls of the steps release the GIL (a
re-check is one call of :mod:`sif.actions._fsc`), so lanes run them on
several CPUs; one lane is the default (see :data:`THREADS`).

:class:`Lanes` runs a list of *lanes* (functions), the first in the calling
thread, each other in a thread of its own (started on first use, kept for
the run), and returns once every lane has returned, even when the caller's
own lane is interrupted (Ctrl-C): the other lanes are told to :attr:`stop`
(they finish the step they are in, then take no other) and are waited for,
so no descriptor a lane uses is closed under it. A lane catches its steps'
own errors (see :func:`attempt`); anything else it raises is raised again in
the caller once every lane is back. :class:`Closer` closes the descriptors of
the dropped files beside the run.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

try:
    from sif.actions import _fsc  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # not built (no compiler at install time)
    _fsc = None

THREADS = 1
"""Lanes of a run by default (never more than the CPUs this process may use). One: on
two quiet cores (bench/actions.py's tree, 6,556 links, in process, interleaved), one
lane took 0.52-0.55 s and two 0.58-0.61 s, the second core being busy with the closes
(:class:`Closer`) and every step handing the GIL between the lanes; two lanes were
faster only on a busy machine (load 7-10), where two threads get more of it."""


def default_threads(wanted: int | None = None) -> int:
    """``wanted`` lanes (default :data:`THREADS`), or fewer where this process may use
    fewer CPUs."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(THREADS if wanted is None else wanted, cpus))


class Failed:
    """A step's error, caught in its lane, settled later in plan order."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def attempt(errors: tuple[type[BaseException], ...], func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)``, or a :class:`Failed` holding one of ``errors`` it raised."""
    try:
        return func(*args)
    except errors as exc:
        return Failed(exc)


class Lanes:
    """Runs lanes in this thread and up to ``size - 1`` others (see the module)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.stop = False
        """Set when the caller's lane stopped early: the other lanes take no further step."""
        self._todo: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._back: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def run(self, lanes: list[Callable[[], None]]) -> None:
        """Run every lane (at most :attr:`size`); return when all are back."""
        assert len(lanes) <= self.size
        if not lanes:
            return
        while len(self._threads) < len(lanes) - 1:
            t = threading.Thread(
                target=self._loop, name=f"sif-lane-{len(self._threads) + 1}", daemon=True
            )
            t.start()
            self._threads.append(t)
        self.stop = False
        for lane in lanes[1:]:
            self._todo.put(lane)
        try:
            lanes[0]()
        except BaseException:
            self.stop = True
            self._wait(len(lanes) - 1)
            raise
        error = self._wait(len(lanes) - 1)
        if error is not None:
            raise error

    def _wait(self, n: int) -> BaseException | None:
        """Wait for ``n`` lanes; the first error one raised. A Ctrl-C meanwhile stops
        the lanes, is waited through, and raised once they are back."""
        error: BaseException | None = None
        interrupted: BaseException | None = None
        while n:
            try:
                got = self._back.get()
            except BaseException as exc:  # Ctrl-C: the lanes finish their step first
                self.stop = True
                interrupted = interrupted or exc
                continue
            n -= 1
            error = error or got
        if interrupted is not None:
            raise interrupted
        return error

    def _loop(self) -> None:
        while (lane := self._todo.get()) is not None:
            try:
                lane()
            except BaseException as exc:
                self.stop = True
                self._back.put(exc)
            else:
                self._back.put(None)

    def shutdown(self) -> None:
        """End the threads (between runs only)."""
        for _ in self._threads:
            self._todo.put(None)
        for t in self._threads:
            t.join()
        self._threads = []


class Ahead:
    """One call run in a thread of its own (from :meth:`start`) while the caller goes on:
    :meth:`join` waits for it and returns its result (raising what it raised); :attr:`stop`
    asks it to end early (it looks between steps), :meth:`abandon` sets it and waits.
    Started apart from its making: a Ctrl-C in ``start`` leaves the caller an
    :class:`Ahead` to abandon."""

    def __init__(self, func: Callable[[Ahead], Any]) -> None:
        self.stop = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(func,), name="sif-ahead")
        self._thread.daemon = True

    def start(self) -> None:
        self._thread.start()

    def _run(self, func: Callable[[Ahead], Any]) -> None:
        try:
            self._result = func(self)
        except BaseException as exc:
            self._error = exc

    def join(self) -> Any:
        """Wait for the call (through a Ctrl-C: the thread is stopped first); its result."""
        try:
            self._thread.join()
        except BaseException:
            self.abandon()
            raise
        if self._error is not None:
            raise self._error
        return self._result

    def abandon(self) -> Any:
        """Stop the call and wait for it; its result (whatever it made), errors dropped."""
        self.stop = True
        while self._thread.is_alive():
            with contextlib.suppress(BaseException):  # a second Ctrl-C: wait all the same
                self._thread.join()
        return self._result


def close_all(fds: list[int]) -> None:
    """Close every descriptor of ``fds`` (read-only ones: an error loses nothing): in one
    call without the GIL where ``sif.actions._fsc`` is built (each ``os.close`` takes the
    GIL back, from the run's lanes: with eight closer threads, a third of the lanes' time
    went to waiting for it)."""
    if _fsc is not None:
        _fsc.close_all(fds)
        return
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class Closer:
    """Closes the dropped files' descriptors, in a few threads of their own.

    The last close of a file whose last name is gone frees its blocks; where
    the file system discards freed blocks at once (ext4 ``-o discard``), that
    is a wait on the device, file after file: without this, most of a run's
    time. Each batch's descriptors are closed here, in :attr:`THREADS`
    chunks, while the next batch runs; the waits overlap. The descriptors
    are read-only: closing them changes nothing else.
    """

    THREADS = 8
    """Waits that overlap: on ext4 with ``discard``, at load 10, a run of 6.5 k links
    waited 0.75-1.6 s on its closes with 3 threads, 0.13-0.27 s with 8 (a close waits on
    the file system and the device, not on a CPU)."""
    BEHIND = 2
    """Batches whose descriptors may wait to be closed (then the run waits)."""

    def __init__(self) -> None:
        self.todo: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self.finished: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.pending = 0
        self.threads: list[threading.Thread] = []

    def close_all(self, fds: list[int]) -> None:
        if not fds:
            return
        if not self.threads:
            for i in range(self.THREADS):
                t = threading.Thread(target=self._loop, name=f"sif-close-{i}", daemon=True)
                t.start()
                self.threads.append(t)
        n = -(-len(fds) // self.THREADS)
        for i in range(0, len(fds), n):
            self.todo.put(fds[i : i + n])
            self.pending += 1
        while self.pending > self.BEHIND * self.THREADS:
            self.finished.get()
            self.pending -= 1

    def _loop(self) -> None:
        while (chunk := self.todo.get()) is not None:
            close_all(chunk)
            self.finished.put(len(chunk))

    def shutdown(self) -> None:
        """Return once every descriptor handed over is closed."""
        for _ in self.threads:
            self.todo.put(None)
        for t in self.threads:
            t.join()
        self.threads = []
        self.pending = 0
        self.finished = queue.SimpleQueue()
