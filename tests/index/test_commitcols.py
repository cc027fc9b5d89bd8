"""A commit's per-file columns (``sif.index.commitcols.Columns``), made in two C passes:
the same segment records and catalog fields as one Python step a field gave, for every
shape of entry (archive members, unknown sizes and ctimes, names that are not UTF-8)."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.content import KINDS, VIEW_NAMES
from sif.index.build import DEFAULT_PARAMS
from sif.index.commitcols import Columns
from sif.index.scan import scan_entries
from sif.index.segments import make_files
from sif.index.store import NewFile
from treeutil import write

UNKNOWN = -(1 << 62)


def _entries(root: Path) -> list[NewFile]:
    """Real scans: plain files (one named with a byte that is not UTF-8), random bytes,
    and a zip's two members (their origin is the zip)."""
    rng = np.random.default_rng(3)
    write(root / "a.txt", rng.integers(97, 123, 3000, dtype=np.uint8).tobytes())
    write(root / "b.bin", rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    write(
        os.fsencode(root) + b"/caf\xe9.txt", rng.integers(97, 123, 2000, dtype=np.uint8).tobytes()
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("in/x.txt", rng.integers(97, 123, 2500, dtype=np.uint8).tobytes())
        z.writestr("in/y.txt", rng.integers(97, 123, 2600, dtype=np.uint8).tobytes())
    write(root / "m.zip", buf.getvalue())
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        st_ = os.stat(path)
        for e in scan_entries(path, DEFAULT_PARAMS):
            out.append(
                NewFile(
                    e.path,
                    st_.st_dev,
                    st_.st_ino,
                    st_.st_mtime_ns,
                    e.scan,
                    e.origin,
                    st_.st_size,
                    st_.st_ctime_ns,
                )
            )
    return out


def _by_hand(added: list[NewFile], ids: np.ndarray) -> tuple[list[tuple[object, ...]], list[bytes]]:
    """The records and paths as the commit made them before, one field at a time."""
    kinds = {k: i for i, k in enumerate(KINDS)}
    views = {v: i for i, v in enumerate(VIEW_NAMES)}
    paths = [os.fsencode(f.path) for f in added]
    origins = [
        p if f.origin is None or f.origin == f.path else os.fsencode(f.origin)
        for f, p in zip(added, paths, strict=True)
    ]
    recs = [
        (
            int(i),
            kinds[f.scan.kind],
            len(f.scan.fingerprints),
            f.scan.n_distinct,
            f.scan.size,
            f.dev,
            f.ino,
            f.mtime_ns,
            f.scan.digest,
            views[f.scan.view],
            len(o),
        )
        for i, f, o in zip(ids, added, origins, strict=True)
    ]
    return recs, paths


@settings(deadline=None, max_examples=40)
@given(st.data())
def test_columns_give_what_a_field_at_a_time_gave(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("c")
    base = _entries(root)
    assert {f.scan.kind for f in base} == set(KINDS)
    assert sum(f.origin != f.path for f in base) == 2  # the members
    # Any mix of them, some with their origin, size on disk or ctime unknown.
    picks = data.draw(st.lists(st.integers(0, len(base) - 1), max_size=12))
    added = []
    for k in picks:
        f = base[k]
        how = data.draw(st.integers(0, 3))
        if how == 1:
            f = NewFile(f.path, f.dev, f.ino, f.mtime_ns, f.scan, None, None, f.ctime_ns)
        elif how == 2:
            f = NewFile(f.path, f.dev, f.ino, f.mtime_ns, f.scan, f.origin, f.file_size, None)
        added.append(f)
    ids = np.arange(7, 7 + len(added), dtype=np.uint32)
    cols = Columns(added, UNKNOWN)
    recs, paths = _by_hand(added, ids)
    want = make_files(recs, paths)
    got = cols.files(ids)
    assert got.records.tobytes() == want.records.tobytes()
    assert got.paths == want.paths and np.array_equal(got.path_offsets, want.path_offsets)
    assert list(cols.origins) == [
        os.fsencode(f.path if f.origin is None else f.origin) for f in added
    ]
    assert list(cols.file_sizes) == [f.disk_size for f in added]
    assert list(cols.ctimes) == [UNKNOWN if f.ctime_ns is None else f.ctime_ns for f in added]
    assert list(cols.kind_names) == [f.scan.kind for f in added]
    assert list(cols.view_names) == [f.scan.view for f in added]


def _fields(f: NewFile) -> tuple[object, ...]:
    s = f.scan
    return (
        f.path,
        f.dev,
        f.ino,
        f.mtime_ns,
        f.origin,
        f.file_size,
        f.ctime_ns,
        s.kind,
        s.digest,
        s.size,
        s.view,
        s.n_distinct,
        s.fingerprints.dtype,
        s.fingerprints.tobytes(),
    )


@settings(deadline=None, max_examples=30)
@given(st.data())
def test_entries_as_columns_give_their_new_files_back(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    # Entries (what the workers send back and a commit takes) hold the same entries as
    # the NewFile objects they were made of: by index, in order, after a pickle, after
    # extend, with unknown origins, sizes and ctimes.
    import pickle

    from sif.index.entries import Entries

    root = tmp_path_factory.mktemp("e")
    base = _entries(root)
    picks = data.draw(st.lists(st.integers(0, len(base) - 1), max_size=10))
    added = []
    for k in picks:
        f = base[k]
        if data.draw(st.booleans()):
            f = NewFile(f.path, f.dev, f.ino, f.mtime_ns, f.scan, None, None, None)
        added.append(f)
    cut = data.draw(st.integers(0, len(added)))
    entries = Entries.of(added[:cut])
    entries.extend(added[cut:])  # NewFile objects after
    both = Entries.of(added[:cut])
    both.extend(Entries.of(added[cut:]))  # Entries after
    want = [_fields(f) for f in added]
    for e in (entries, both, pickle.loads(pickle.dumps(both))):
        assert len(e) == len(added)
        assert [_fields(f) for f in e] == want
        assert [_fields(e[k]) for k in range(len(e))] == want
        assert e.fingerprints().tobytes() == b"".join(f.scan.fingerprints.tobytes() for f in added)
    if added:
        assert _fields(entries[-1]) == want[-1]
    entries.clear()
    assert len(entries) == 0 and entries.fingerprints().size == 0


def _segment_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "sif-segment"]


def _catalog(index: Path) -> tuple[int, int, list[str]]:
    """(files in the catalog, next file id, segments it names)."""
    from sif.index import open_store

    with open_store(index) as store:  # type: ignore[attr-defined]
        con = store._con
        (n,) = con.execute("SELECT count(*) FROM files").fetchone()
        segs = [r[0] for r in con.execute("SELECT name FROM segments ORDER BY id").fetchall()]
        return n, store._int_meta("next_file_id"), segs


def test_a_segment_that_fails_leaves_the_catalog_as_it_was(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The segment is written in a thread while the catalog's rows go in: its failure (a
    full disk) is the commit's, raised once the rows are in, and rolls them back."""
    import errno

    from sif.index import build_index
    from sif.index import commitcols as cc

    rng = np.random.default_rng(8)
    for tree, n in (("a", 3), ("b", 5)):
        for i in range(n):
            write(tmp_path / tree / f"f{i}.txt", rng.integers(97, 123, 4000, np.uint8).tobytes())
    index = tmp_path / "idx"
    build_index([tmp_path / "a"], index)
    before = _catalog(index)
    assert before[0] == 3
    import threading

    making = threading.Event()  # origin_keys: the rows are being made for the insert
    inserted = []
    real_keys = cc.origin_keys

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        making.set()
        return real_keys(*args, **kwargs)

    def full(*args, **kwargs):  # type: ignore[no-untyped-def]
        inserted.append(making.wait(60))  # the rows go in meanwhile
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cc, "write_segment", full)
    monkeypatch.setattr(cc, "origin_keys", counted)
    with pytest.raises(Exception, match=r"[Nn]o space left"):
        build_index([tmp_path / "a", tmp_path / "b"], index)
    assert inserted == [True]  # the rows were going in while the segment failed
    assert _segment_threads() == []
    assert _catalog(index) == before
    monkeypatch.undo()
    again = build_index([tmp_path / "a", tmp_path / "b"], index)
    assert again.new == 5 and _catalog(index)[0] == 8


def test_a_failed_transaction_waits_for_its_segment(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A failure of the catalog's part returns only once the segment's thread is done:
    nothing writes into the index after the commit has failed."""
    from sif.index import build_index
    from sif.index import commitcols as cc

    write(
        tmp_path / "a" / "f.txt",
        np.random.default_rng(9).integers(97, 123, 4000, np.uint8).tobytes(),
    )
    real = cc.write_segment
    finished = []

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        import time

        time.sleep(0.3)
        out = real(*args, **kwargs)
        finished.append(True)
        return out

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the catalog's part failed")

    monkeypatch.setattr(cc, "write_segment", slow)
    monkeypatch.setattr(cc, "origin_keys", broken)
    with pytest.raises(RuntimeError, match="catalog's part"):
        build_index([tmp_path / "a"], tmp_path / "idx")
    assert finished == [True] and _segment_threads() == []


STOP_DURING_SEGMENT = """
import os, signal, sys, threading, time
import numpy as np
from sif.index import build_index
from sif.index import commitcols as cc

root = sys.argv[1]
os.makedirs(f"{root}/a")
rng = np.random.default_rng(1)
for i in range(3):
    with open(f"{root}/a/f{i}.txt", "wb") as f:
        f.write(rng.integers(97, 123, 4000, np.uint8).tobytes())
real_write, real_keys = cc.write_segment, cc.origin_keys
done = []

def slow(*a, **k):  # the segment's thread: a second Ctrl-C while the commit waits for it
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    out = real_write(*a, **k)
    done.append(time.monotonic())
    return out

def stopped(*a, **k):  # the first Ctrl-C, in the transaction
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)
    return real_keys(*a, **k)

cc.write_segment, cc.origin_keys = slow, stopped
try:
    build_index([f"{root}/a"], f"{root}/idx")
except KeyboardInterrupt:
    left = [t.name for t in threading.enumerate() if t.name == "sif-segment"]
    print("out", bool(done) and done[0] <= time.monotonic(), left)
"""


def test_ctrl_c_twice_returns_only_once_the_segment_is_written(tmp_path: Path) -> None:
    """Ctrl-C in the transaction, again while the commit waits for its segment: the
    KeyboardInterrupt leaves the commit only once the segment's thread is done (it
    wrote on after the store was closed and its lock let go)."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", STOP_DURING_SEGMENT, str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.stdout.strip() == "out True []", (run.stdout, run.stderr[-2000:])
