"""The index opened, verified and read for a run's plan, in a thread, while the walk runs.

Before it plans, ``sif index`` needs the walk of its roots and what the index
knows (:meth:`sif.index.store.IndexStore.known_columns`), which needs the store
opened (DuckDB's connection and its read of every table: ~0.15 s at 1 M files)
and verified (a checksum of every segment: ~0.05 s). Neither needs the other,
and both leave the GIL most of the time (the walk is in C, DuckDB's queries
release it): :class:`Opening` does the store's part in a thread of its own, so
that on two cores it hides behind the walk (~1.5 s at 1 M files). Its failure
(the index in use, damaged, not writable) is raised where the walk next looks
(:meth:`Opening.check`, a chunk of files at a time) and at the latest by
:meth:`Opening.result`.

A new index knows nothing, so its plan needs nothing from the store: there,
``sif index`` (two jobs, no ``--wait``) reads and fingerprints while the thread
imports DuckDB and creates the catalog, checks the thread a batch of results at a
time, and takes the store at its first commit (``sif.index.build``); a store that
turns out to hold files then (another run filled it meanwhile) stops the run,
``IndexInUse``, before anything is written.

:meth:`Opening.close` (Ctrl-C during the walk, or any failure) sets the thread's
``cancel`` event: a thread waiting for the index's lock (``--wait``) gives up
within :data:`sif.index.indexdir.LOCK_POLL`, and one that has the lock goes no
further (neither verify nor read) and closes the store itself; ``close`` then
waits for the thread's ``done`` event, set in its ``finally``. Never
:meth:`threading.Thread.join`: on CPython 3.11 a join interrupted by Ctrl-C
marks the thread stopped while it still runs, and a later join returns at once
(a library's host would then keep a thread that takes the lock for good).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sif.events import Progress
from sif.index.store import IndexStore, KnownColumns, ParamSet

__all__ = ["Opening"]


class Opening:
    """``open_store(cancel)``, its :meth:`verify` and its :meth:`known_columns` of
    ``pset``, in a thread started at once; ``cancel`` is the event :meth:`close` sets."""

    def __init__(self, open_store: Callable[[threading.Event], IndexStore], pset: ParamSet) -> None:
        self._open, self._pset = open_store, pset
        self._store: IndexStore | None = None
        self._known: KnownColumns | None = None
        self._error: BaseException | None = None
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sif-index-open", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        store: IndexStore | None = None
        try:
            store = self._open(self._cancel)
            if not self._cancel.is_set():
                store.verify()  # never build on damaged fingerprints: IndexCorrupt
            if not self._cancel.is_set():
                self._known = store.known_columns(self._pset)
        except BaseException as exc:  # raised in the caller's thread
            self._error = exc
        finally:
            if store is not None and (self._cancel.is_set() or self._error is not None):
                try:  # given up, or failed: nobody takes it, nothing is read from it
                    store.close()
                except BaseException as exc:
                    self._error = self._error or exc
                store = None
            self._store = store
            self._done.set()

    def check(self) -> None:
        """Raise the thread's failure now, if it failed already."""
        if self._error is not None:
            raise self._error

    def watch(self, progress: Progress) -> Progress:
        """``progress``, whose :meth:`advance` (the walk calls it a chunk at a time)
        raises the thread's failure first."""
        return _Checked(progress, self.check)

    def result(self) -> tuple[IndexStore, KnownColumns]:
        """The store and what it knows, once the thread is done; or its failure. The
        store is the caller's to close from then on."""
        self._done.wait()
        self.check()
        assert self._store is not None and self._known is not None
        store, known = self._store, self._known
        self._store = self._known = None
        return store, known

    def close(self) -> None:
        """Give the thread up and wait for it; close the store it opened unless
        :meth:`result` gave it away (the thread closes one it opens after this)."""
        self._cancel.set()
        self._done.wait()
        self._known = None
        if self._store is not None:
            store, self._store = self._store, None
            store.close()


class _Checked:
    """A :class:`Progress` that calls ``check`` before each :meth:`advance`."""

    def __init__(self, progress: Progress, check: Callable[[], None]) -> None:
        self._progress, self._check = progress, check

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        self._progress.stage(name, total, unit)

    def advance(self, amount: int = 1) -> None:
        self._check()
        self._progress.advance(amount)

    def log(self, message: str) -> None:
        self._progress.log(message)

    def close(self) -> None:
        self._progress.close()
