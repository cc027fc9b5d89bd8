"""A run's commits, each in a thread while the run reads on (``sif index -j 2`` and more).

With two jobs or more, ``sif index`` is a coordinator: its workers read and
fingerprint, and this process collects their entries and commits them, a
checkpoint at a time (:data:`sif.index.build.CHECKPOINT_ROWS`). A commit
(the segment's sort and files, the catalog's transaction, fsyncs) took this
process 0.15-0.25 s for 16 k files, during which it handed out no work: the
workers ran dry after the two batches each they hold, and on a tree of 100 k
files the run's seven commits (of 16 k entries, as checkpoints were then) were
1.5 of its 6.1 s. Nearly all of a commit leaves the GIL (numpy's sort, DuckDB,
writes and fsyncs), so a thread commits one checkpoint while this process goes
on collecting the next.

One thread for the run, fed through a first-in, first-out queue: commits run
one at a time, in the run's order. Whether a commit is still in flight is
never decided in the caller's thread (a Ctrl-C may land anywhere there): to
wait, the caller queues a marker and waits for the thread to reach it, which
it does only after every commit queued before. :meth:`Committer.commit` first
waits so (at most one checkpoint commits while the next is collected) and
raises the failure of the one before (a full disk: the error a commit made
here would raise, one checkpoint later; the index keeps its last committed
state either way). The store is the thread's while a commit runs: nothing
else may use it until :meth:`Committer.wait` or :meth:`Committer.close`
returns. :meth:`close` (a failure or Ctrl-C elsewhere) lets the commits
queued end, Ctrl-C or not, before the caller closes the store: a DuckDB
connection closed under a running transaction is not a state to leave an
index in. As :mod:`sif.index.opening` does, it waits on an event, never on
:meth:`threading.Thread.join`.

The lists handed to :meth:`commit` are the committer's from then on: emptied
once committed, so that the memory trim after each commit finds the
checkpoint's entries freed. With one job (``background`` false) each commit
runs in the caller's thread, at once: one job means one core.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from sif.core.anchors import AnchorSet
from sif.index.entries import Entries
from sif.index.store import IndexStore, ParamSet
from sif.memtrim import release_memory

__all__ = ["Committer"]

_STOP = object()  # the thread's last job


class Committer:
    """Commits of ``store`` under ``pset`` and ``anchors``, in a thread if ``background``."""

    def __init__(
        self, store: IndexStore, pset: ParamSet, anchors: AnchorSet | None, background: bool
    ) -> None:
        self._store, self._pset, self._anchors = store, pset, anchors
        self._error: BaseException | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._serve, name="sif-commit", daemon=True)
            self._thread.start()  # nothing queued yet: interrupted here, it only idles

    def commit(self, added: Entries, dropped: list[int]) -> None:
        """Commit ``added`` and ``dropped`` after the commit before (whose failure is
        raised here instead); in the thread, this returns once it is queued."""
        self.wait()
        if self._thread is None:
            self._commit(added, dropped)
        else:
            self._jobs.put((added, dropped))

    def _commit(self, added: Entries, dropped: list[int]) -> None:
        self._store.commit(self._pset, self._anchors, added, dropped)
        added.clear()  # the checkpoint's entries, freed before the trim
        dropped.clear()
        release_memory()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            if isinstance(job, threading.Event):  # every commit queued before it is done
                job.set()
            else:  # never after a failure: commit() raises it before it queues another
                try:
                    self._commit(*job)
                except BaseException as exc:  # raised in the caller's thread
                    self._error = exc
            del job

    def _reached(self) -> threading.Event:
        marker = threading.Event()
        self._jobs.put(marker)
        return marker

    def wait(self) -> None:
        """Wait for the commits queued, if any; raise the failure of one."""
        if self._thread is not None:
            self._reached().wait()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Let the commits queued end (Ctrl-C meanwhile is raised after them) and stop the
        thread; a failure of theirs is dropped: the caller, failing already, raises its own."""
        if self._thread is None:
            return
        interrupted: BaseException | None = None
        marker: threading.Event | None = None
        while True:
            try:
                if marker is None:
                    marker = self._reached()
                marker.wait()
                break
            except KeyboardInterrupt as exc:  # a marker queued twice is harmless
                interrupted = exc
        self._jobs.put(_STOP)
        self._thread = None
        self._error = None
        if interrupted is not None:
            raise interrupted
