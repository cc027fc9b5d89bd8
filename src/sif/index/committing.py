"""A run's commits, each in a thread while the run reads on (``sif index -j 2`` and more).

With two jobs or more, ``sif index`` is a coordinator: its workers read and
fingerprint, and this process collects their entries and commits them, a
checkpoint at a time (:data:`sif.index.build.CHECKPOINT_ENTRIES`). A commit
(the segment's sort and files, the catalog's transaction, fsyncs) took this
process 0.15-0.25 s for 16 k files, during which it handed out no work: the
workers ran dry after the two batches each they hold, and on a tree of 100 k
files the run's seven commits were 1.5 of its 6.1 s. Nearly all of a commit
leaves the GIL (numpy's sort, DuckDB, writes and fsyncs), so a thread commits
one checkpoint while this process goes on collecting the next.

One commit at a time, in the run's order: :meth:`Committer.commit` first waits
for the one before, and raises its failure (a full disk: the error a commit
made here would raise, one checkpoint later; the index keeps its last
committed state either way). The store is the thread's while a commit runs:
nothing else may use it until :meth:`Committer.wait` or :meth:`Committer.close`
returns. :meth:`close` (a failure or Ctrl-C elsewhere) lets a commit in flight
end, Ctrl-C or not, before the caller closes the store: a DuckDB connection
closed under a running transaction is not a state to leave an index in. As
:mod:`sif.index.opening` does, it waits on an event, never on
:meth:`threading.Thread.join`.

With one job (``background`` false) each commit runs in the caller's thread,
at once: one job means one core.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from sif.core.anchors import AnchorSet
from sif.index.store import IndexStore, NewFile, ParamSet
from sif.memtrim import release_memory

__all__ = ["Committer"]


class Committer:
    """Commits of ``store`` under ``pset`` and ``anchors``, in a thread if ``background``."""

    def __init__(
        self, store: IndexStore, pset: ParamSet, anchors: AnchorSet | None, background: bool
    ) -> None:
        self._store, self._pset, self._anchors = store, pset, anchors
        self._background = background
        self._done = threading.Event()
        self._done.set()  # nothing in flight
        self._error: BaseException | None = None

    def commit(self, added: Sequence[NewFile], dropped: Sequence[int]) -> None:
        """Commit ``added`` and ``dropped`` after the commit before (whose failure is
        raised here instead); in the thread, this returns once it has started."""
        self.wait()
        if not self._background:
            self._store.commit(self._pset, self._anchors, added, dropped)
            release_memory()  # the checkpoint's entries, freed
            return
        self._done.clear()
        thread = threading.Thread(
            target=self._run, args=(added, dropped), name="sif-commit", daemon=True
        )
        try:
            thread.start()
        except BaseException:
            self._done.set()
            raise

    def _run(self, added: Sequence[NewFile], dropped: Sequence[int]) -> None:
        try:
            self._store.commit(self._pset, self._anchors, added, dropped)
            del added, dropped
            release_memory()
        except BaseException as exc:  # raised in the caller's thread
            self._error = exc
        finally:
            self._done.set()

    def wait(self) -> None:
        """Wait for the commit in flight, if any; raise its failure."""
        self._done.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Let a commit in flight end (Ctrl-C meanwhile is raised after it); its failure
        is dropped: the caller, failing already, raises its own."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.wait()
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
        self._error = None
        if interrupted is not None:
            raise interrupted
