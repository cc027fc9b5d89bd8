"""The batched read of plain files gives exactly what the per-file scan gives."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.content import ContentOptions
from sif.fingerprint import make_params, small_limit
from sif.index import scan_entries
from sif.index.build import DEFAULT_PARAMS
from sif.index.scan import scan_plain_files
from treeutil import write

DATA = Path(__file__).parent.parent / "data" / "content"


def triple(path: Path) -> tuple[str, int, int]:
    st_ = os.stat(path)
    return str(path), st_.st_dev, st_.st_ino


def same(a: list, b: list) -> None:
    assert [(e.path, e.origin, e.label) for e in a] == [(e.path, e.origin, e.label) for e in b]
    for x, y in zip(a, b, strict=True):
        assert (x.scan.kind, x.scan.digest, x.scan.size, x.scan.view) == (
            y.scan.kind,
            y.scan.digest,
            y.scan.size,
            y.scan.view,
        )
        assert np.array_equal(x.scan.fingerprints, y.scan.fingerprints)
        assert x.scan.fingerprints.dtype == y.scan.fingerprints.dtype == np.uint32
        assert x.scan.n_distinct == y.scan.n_distinct


def tree(root: Path) -> list[Path]:
    rng = np.random.default_rng(2)
    words = np.array([b"alpha", b"beta", b"gamma", b"delta", b"omega"])
    files = {
        "text.txt": b" ".join(words[rng.integers(0, 5, 4000)].tolist()),
        "small.txt": b"short",
        "empty": b"",
        "binary.bin": rng.integers(0, 256, 30_000, dtype=np.uint8).tobytes(),
        "page.html": b"<html><body>" + b"x y z " * 2000 + b"</body></html>",
        "doc.ms": b".TH X 1\n.SH NAME\n" + b"some text here\n" * 300,
        "x.gz": gzip.compress(b"compressed text " * 3000, mtime=0),
        "runs.txt": b"=" * 5000 + b"tail",
        "big.txt": b"a line of text that repeats\n" * 40_000,  # over 1 MiB: streamed
    }
    out = []
    for name, data in files.items():
        write(root / name, data)
        out.append(root / name)
    for name in ("ps-a.ps",):
        (root / name).write_bytes((DATA / name).read_bytes())
        out.append(root / name)
    return out


@pytest.mark.parametrize("mode", ["auto", "raw", "markup", "unpack", "code"])
@pytest.mark.parametrize("scheme", ["winnow", "sif94"])
def test_plain_files_scan_as_scan_entries(tmp_path: Path, mode: str, scheme: str) -> None:
    paths = tree(tmp_path)
    content = ContentOptions(normalize=mode)
    params = DEFAULT_PARAMS if scheme == "winnow" else make_params("sif94", min_fingerprints=20)
    got = scan_plain_files([triple(p) for p in paths], params, None, content)
    taken = {p.name for p, g in zip(paths, got, strict=True) if g is not None}
    for p, g in zip(paths, got, strict=True):
        if g is not None:
            same(g, scan_entries(p, params, None, content))
    # What is not one raw entry of a small file goes to the per-file scan.
    assert "big.txt" not in taken
    assert ("x.gz" in taken) == (mode == "raw")
    assert ("ps-a.ps" in taken) == (mode in ("raw", "unpack"))
    assert ("page.html" in taken) == (mode not in ("markup", "code"))
    assert ("text.txt" in taken) == (mode != "code")


def test_plain_files_leave_what_cannot_be_read_to_the_per_file_scan(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", b"a" * 100 + b"b" * 100)
    write(tmp_path / "b.txt", b"some text " * 100)
    os.mkfifo(tmp_path / "fifo")
    moved = triple(tmp_path / "b.txt")
    os.replace(tmp_path / "a.txt", tmp_path / "b.txt")  # another inode under the name
    items = [triple(tmp_path / "fifo"), moved, (str(tmp_path / "gone"), 1, 1)]
    assert scan_plain_files(items, DEFAULT_PARAMS) == [None, None, None]


@settings(deadline=None, max_examples=25)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=8))
def test_plain_batches_of_any_bytes(tmp_path_factory: pytest.TempPathFactory, blobs: list) -> None:
    root = tmp_path_factory.mktemp("b")
    paths = []
    for i, b in enumerate(blobs):
        write(root / f"f{i}", b)
        paths.append(root / f"f{i}")
    got = scan_plain_files([triple(p) for p in paths], DEFAULT_PARAMS)
    assert small_limit(DEFAULT_PARAMS) > 3000
    for p, g in zip(paths, got, strict=True):
        if g is not None:
            same(g, scan_entries(p, DEFAULT_PARAMS))
        else:  # only a compressed or archive magic at the start sends a file away
            assert (p.read_bytes()[:2] in (b"\x1f\x8b", b"PK", b"BZ")) or p.read_bytes()[:1] in (
                b"\xfd",
                b"\x28",
                b"\x7f",
                b"%",
                b"\xef",
                b"\x04",
            )


def test_a_batch_of_reads_pickles_as_columns_and_comes_back_whole(tmp_path: Path) -> None:
    # What a worker sends back: the same reads, entries, warnings and failures.
    import pickle

    from sif.index import scanjobs

    paths = tree(tmp_path)
    items = []
    for p in paths:
        st_ = os.stat(p)
        items.append(
            (str(p), st_.st_dev, st_.st_ino, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns)
        )
    items.append((str(tmp_path / "gone"), 1, 1, 5, 0, 0))
    scanjobs.set_run(DEFAULT_PARAMS, None, ContentOptions())
    try:
        reads = scanjobs._scan_batch((False, items))
    finally:
        scanjobs.forget_run()
    back = pickle.loads(pickle.dumps(reads))
    assert type(back) is type(reads) and len(back) == len(reads) == len(items)
    for a, b in zip(reads, back, strict=True):
        assert (a.path, a.warnings, a.failed) == (b.path, b.warnings, b.failed)
        assert [
            (e.path, e.dev, e.ino, e.mtime_ns, e.origin, e.file_size, e.ctime_ns) for e in a.entries
        ] == [
            (e.path, e.dev, e.ino, e.mtime_ns, e.origin, e.file_size, e.ctime_ns) for e in b.entries
        ]
        same([_entry(e) for e in a.entries], [_entry(e) for e in b.entries])
    assert back[-1].failed is not None and not back[-1].entries


def _entry(new: object) -> object:
    from sif.index.scan import ScannedEntry

    return ScannedEntry(new.path, new.origin, "", new.scan)  # type: ignore[attr-defined]
