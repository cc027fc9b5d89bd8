"""Commits in a thread (sif.index.committing): ``sif index -j 2`` commits a checkpoint while
it collects the next. The same index as commits made inline, one commit at a time and in
order, a failed commit raised, and the store never closed under a commit in flight."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sif.index import build_index, open_store, scanjobs
from sif.index.committing import Committer
from sif.index.duck import DuckStore
from sif.index.store import NewFile
from treeutil import segment_content, write


def _tree(root: Path, n: int = 60) -> None:
    rng = np.random.default_rng(11)
    for i in range(n):
        write(
            root / f"d{i % 4}" / f"f{i:02d}.txt",
            rng.integers(97, 123, 3000, dtype=np.uint8).tobytes(),
        )


class _Watched:
    """DuckStore._commit wrapped (inside the mapping of its I/O errors): which thread made
    each commit, and how many ran at once; the commit ``fail_at`` (from 1) fails as on a
    full disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> None:
        self.threads: list[str] = []
        self.most = 0
        self._running = 0
        self._lock = threading.Lock()
        inner = DuckStore._commit

        def commit(store: DuckStore, *args: Any) -> None:
            with self._lock:
                self._running += 1
                self.most = max(self.most, self._running)
                self.threads.append(threading.current_thread().name)
                n = len(self.threads)
            try:
                time.sleep(0.02)  # a commit long enough for the next checkpoint to come
                if n == fail_at:
                    raise OSError(28, "No space left on device")
                inner(store, *args)
            finally:
                with self._lock:
                    self._running -= 1

        monkeypatch.setattr(DuckStore, "_commit", commit)


def test_commits_in_a_thread_give_the_index_of_commits_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sif.index import build

    _tree(tmp_path / "t")
    whole = build_index([tmp_path / "t"], tmp_path / "whole", jobs=1)
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 3)  # 20 commits, then a compaction
    monkeypatch.setattr(build, "BATCH_FILES", 3)
    inline = build_index([tmp_path / "t"], tmp_path / "inline", jobs=1)
    watched = _Watched(monkeypatch)
    threaded = build_index([tmp_path / "t"], tmp_path / "threaded", jobs=2)
    assert whole.commits == 1 and inline.commits >= 20 and threaded.commits >= 20
    # Every checkpoint but the run's last commit in the thread; never two at once.
    assert watched.threads[:-1] == ["sif-commit"] * (threaded.commits - 1)
    assert watched.threads[-1] == threading.current_thread().name and watched.most == 1
    assert len(os.listdir(tmp_path / "threaded" / "segments")) == 1
    content = segment_content(tmp_path / "whole")
    assert segment_content(tmp_path / "inline") == content
    assert segment_content(tmp_path / "threaded") == content


def test_a_checkpoint_comes_at_a_count_of_fingerprint_rows_as_well_as_of_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run commits once its pending entries hold the rows' limit, however few entries
    they are (each batch of 3 files here: 60 files, 20 batches, each over a limit of one
    row, then the run's last commit); the rows are counted across batches, so a limit of
    all of them is reached with the last batch: one segment, nothing to merge at the
    end. Neither depends on the order in which the walk meets the files."""
    from sif.index import build

    _tree(tmp_path / "t")  # 60 files of 3,000 bytes: 32-45 fingerprints each
    whole = build_index([tmp_path / "t"], tmp_path / "whole", jobs=1)
    rows = sum(_n_fp(tmp_path / "whole"))
    monkeypatch.setattr(build, "BATCH_FILES", 3)
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 1 << 16)
    monkeypatch.setattr(build, "CHECKPOINT_ROWS", 1)
    by_rows = build_index([tmp_path / "t"], tmp_path / "by_rows", jobs=1)
    monkeypatch.setattr(build, "CHECKPOINT_ROWS", rows)  # reached with the last batch only
    once = build_index([tmp_path / "t"], tmp_path / "once", jobs=1)
    assert whole.commits == 1 and by_rows.commits == 20 + 1
    assert once.commits == 2  # at the last batch, then the run's own (nothing pending)
    assert len(os.listdir(tmp_path / "once" / "segments")) == 1
    assert segment_content(tmp_path / "by_rows") == segment_content(tmp_path / "whole")
    assert segment_content(tmp_path / "once") == segment_content(tmp_path / "whole")


def _n_fp(idx: Path) -> list[int]:
    store = open_store(idx)
    try:
        return [int(n) for (n,) in store.catalog().execute("SELECT n_fp FROM files").fetchall()]
    finally:
        store.close()


def test_a_commit_that_fails_in_the_thread_fails_the_run_and_keeps_the_commits_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sif.errors import IndexUnusable
    from sif.index import build

    _tree(tmp_path / "t")
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 3)
    monkeypatch.setattr(build, "BATCH_FILES", 3)
    idx = tmp_path / "idx"
    watched = _Watched(monkeypatch, fail_at=4)
    with pytest.raises(IndexUnusable, match="No space left on device"):
        build_index([tmp_path / "t"], idx, jobs=2)
    assert watched.threads[3] == "sif-commit" and watched.most == 1
    assert len(watched.threads) == 4  # raised at the next checkpoint, before any commit
    monkeypatch.undo()
    store = open_store(idx)
    try:
        store.verify()  # the three commits before the failure, whole
        kept = store.known_columns(build.DEFAULT_PARAMS)
    finally:
        store.close()
    assert len(kept.ids) == 9
    again = build_index([tmp_path / "t"], idx, jobs=2)  # the next run does the rest
    assert (again.new, again.unchanged) == (51, 9)


class _SlowStore:
    """A store whose commit waits for ``release``: what a committer may do meanwhile."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.committed: list[int] = []

    def commit(self, params: Any, anchors: Any, added: Sequence[NewFile], dropped: Any) -> None:
        self.started.set()
        self.release.wait(10)
        self.committed.append(len(added))


def test_close_lets_a_commit_in_flight_end_even_through_ctrl_c() -> None:
    store = _SlowStore()
    committer = Committer(store, None, None, background=True)  # type: ignore[arg-type]
    committer.commit([], [])
    assert store.started.wait(5) and store.committed == []

    def interrupt_then_release() -> None:
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while close() waits
        time.sleep(0.2)
        store.release.set()

    helper = threading.Thread(target=interrupt_then_release)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        committer.close()
    helper.join()
    # Raised only once the commit had ended: the caller may close the store now.
    assert store.committed == [0]


def test_a_commit_waits_for_the_one_before() -> None:
    store = _SlowStore()
    committer = Committer(store, None, None, background=True)  # type: ignore[arg-type]
    committer.commit([], [])
    threading.Timer(0.2, store.release.set).start()
    t0 = time.monotonic()
    committer.commit([None], [])  # type: ignore[list-item]
    assert time.monotonic() - t0 >= 0.15 and store.committed[0] == 0
    committer.wait()
    assert store.committed == [0, 1]


def test_two_ctrl_c_during_the_commits_close_the_store_and_keep_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while this process collects, a second while it waits for the commit in
    flight to end: the store is closed all the same (its lock released), the run's
    parameters forgotten, and the index holds whole commits."""
    from sif.index import build

    _tree(tmp_path / "t")
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 3)
    monkeypatch.setattr(build, "BATCH_FILES", 3)
    inner = DuckStore._commit
    calls: list[str] = []

    def slow(store: DuckStore, *args: Any) -> None:
        calls.append(threading.current_thread().name)
        if len(calls) == 2 and calls[-1] == "sif-commit":
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)  # this process is collecting
            time.sleep(0.4)
            os.kill(os.getpid(), signal.SIGINT)  # it waits for this commit to end
            time.sleep(0.4)
        inner(store, *args)

    monkeypatch.setattr(DuckStore, "_commit", slow)
    idx = tmp_path / "idx"
    with pytest.raises(KeyboardInterrupt):
        build_index([tmp_path / "t"], idx, jobs=2)
    monkeypatch.undo()
    assert calls[:2] == ["sif-commit", "sif-commit"]
    assert scanjobs._PARAMS is None
    store = open_store(idx)  # not IndexInUse: the lock was released
    try:
        store.verify()
        kept = len(store.known_columns(build.DEFAULT_PARAMS).ids)
    finally:
        store.close()
    assert kept % 3 == 0 and 6 <= kept < 60  # whole checkpoints: the second one ended


class _PutThenInterrupted(queue.SimpleQueue):  # type: ignore[type-arg]
    """A queue whose first put is followed by a Ctrl-C (one landing right after it)."""

    def __init__(self) -> None:
        self.interrupted = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item)
        if not self.interrupted and isinstance(item, tuple):
            self.interrupted = True
            raise KeyboardInterrupt


def test_a_commit_queued_as_ctrl_c_lands_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _SlowStore()
    with monkeypatch.context() as m:  # the committer's queue, made as its thread starts
        m.setattr(queue, "SimpleQueue", _PutThenInterrupted)
        committer = Committer(store, None, None, background=True)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        committer.commit([None, None], [])  # type: ignore[list-item]
    assert store.started.wait(5)
    threading.Timer(0.2, store.release.set).start()
    committer.close()  # returns only once the commit queued has ended
    assert store.committed == [2]


@pytest.mark.parametrize("background", [False, True])
def test_the_entries_are_freed_before_the_memory_is_trimmed(
    monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    from sif.index import committing

    store = _SlowStore()
    store.release.set()
    added: list[Any] = [None] * 5
    seen: list[int] = []
    monkeypatch.setattr(committing, "release_memory", lambda: seen.append(len(added)))
    committer = Committer(store, None, None, background=background)  # type: ignore[arg-type]
    committer.commit(added, [7])
    committer.wait()
    committer.close()
    assert store.committed == [5] and seen == [0] and added == []
