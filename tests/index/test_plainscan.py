"""The batched read of plain files gives exactly what the per-file scan gives."""

from __future__ import annotations

import gzip
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.content import ContentOptions
from sif.fingerprint import make_params, small_limit
from sif.index import scan, scan_entries
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


def test_a_batch_is_read_into_columns_in_its_order_and_pickles_whole(tmp_path: Path) -> None:
    # What a worker sends back: every file of the batch in its order, the entries of
    # those read (plain ones in bulk, the others one by one, in their place) as the
    # per-file scan gives them, the failures and their positions; the same after a
    # trip through pickle.
    import pickle

    from sif.index import scanjobs
    from sif.index.scan import ScannedEntry

    paths = tree(tmp_path)
    with zipfile.ZipFile(tmp_path / "m.zip", "w") as z:
        z.writestr("in/x.txt", b"the first member, of words " * 100)
        z.writestr("in/y.txt", b"the second member, other words " * 100)
    paths.insert(3, tmp_path / "m.zip")  # an archive between plain files
    items = []
    for p in paths:
        st_ = os.stat(p)
        items.append(
            (str(p), st_.st_dev, st_.st_ino, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns)
        )
    items.insert(5, (str(tmp_path / "gone"), 1, 1, 5, 0, 0))
    # A file 7 bytes longer when the walk saw it: the entry's size is what was read,
    # its file's size (what the next run compares with the disk) the walk's.
    items[0] = (items[0][0], items[0][1], items[0][2], items[0][3] + 7, *items[0][4:])
    scanjobs.set_run(DEFAULT_PARAMS, None, ContentOptions())
    try:
        batch = scanjobs._scan_batch((False, items))
    finally:
        scanjobs.forget_run()
    back = pickle.loads(pickle.dumps(batch))
    for got in (batch, back):
        assert got.paths == [t[0] for t in items]
        assert got.failed == [5] and list(got.notes) == [5]
        assert got.notes[5][1] is not None and "gone" in got.notes[5][1].path
        entries = list(got.entries)
        want = []
        for t in items:
            if t[0].endswith("gone"):
                continue
            for e in scan_entries(t[0], DEFAULT_PARAMS):
                want.append((e, t))
        assert len(entries) == len(want) > len(paths)  # the zip's members too
        same(
            [ScannedEntry(e.path, e.origin or e.path, "", e.scan) for e in entries],
            [ScannedEntry(e.path, e.origin, "", e.scan) for e, _ in want],
        )
        assert entries[0].file_size == os.path.getsize(items[0][0]) + 7 == items[0][3]
        assert entries[0].scan.size == os.path.getsize(items[0][0])
        for e, (_, t) in zip(entries, want, strict=True):
            assert (e.dev, e.ino, e.file_size, e.mtime_ns, e.ctime_ns) == (
                t[1],
                t[2],
                t[3],
                t[4],
                t[5],
            )
        assert got.sizes == [0 if t[0].endswith("gone") else t[3] for t in items]


def _same_scan(a: object, b: object) -> None:
    for name in ("index", "kinds", "digests", "sizes", "n_distinct", "edges"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.values.tobytes() == b.values.tobytes()  # type: ignore[attr-defined]


@settings(deadline=None, max_examples=30)
@given(
    st.lists(
        st.sampled_from(["text", "empty", "big", "gone", "fifo", "dir", "moved", "proc"]),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_the_compiled_reads_take_and_leave_the_files_python_does(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], data: st.DataObject
) -> None:
    # sif.index._readc: the same files read whole, the same left to the per-file scan
    # (vanished, a FIFO, a directory, another inode under the name, too large, a /proc
    # file that reads more than its size says); a path os.open would refuse, not a
    # str, not an item: left to Python too.
    from sif.index import scan

    assert scan._readc is not None  # built by the install (setup.py)
    root = tmp_path_factory.mktemp("r")
    limit = small_limit(DEFAULT_PARAMS)
    items: list[tuple[str, int, int]] = []
    for k, kind in enumerate(kinds):
        p = root / f"f{k}\udcff" if k % 3 == 0 else root / f"f{k}"
        if kind == "proc":
            items.append(triple(Path("/proc/self/status")))
            continue
        body = data.draw(st.binary(max_size=2000))
        write(p, b"" if kind == "empty" else (b"x" * limit if kind == "big" else body))
        items.append(triple(p))
        if kind == "gone":
            p.unlink()
        elif kind == "fifo":
            p.unlink()
            os.mkfifo(p)
        elif kind == "dir":
            p.unlink()
            p.mkdir()
        elif kind == "moved":
            write(root / "other", body)
            os.replace(root / "other", p)
    compiled = scan.read_plain(items, DEFAULT_PARAMS)
    raw, slots, lengths = scan._readc.read_files(items, limit)
    try:
        scan._readc = None
        python = scan.read_plain(items, DEFAULT_PARAMS)
    finally:
        from sif.index import _readc  # type: ignore[attr-defined]

        scan._readc = _readc
    _same_scan(compiled, python)
    for (path, _, _), kind, start, got in zip(items, kinds, slots, lengths, strict=True):
        if kind in ("text", "empty"):
            assert raw[start : start + got] == Path(path).read_bytes()
        else:
            assert got == -1, kind
    odd = [(str(root) + "/a\x00b", 1, 2), (os.fsencode(root), 1, 2), (str(root), -1, 2)]
    assert scan._readc.read_files(odd, limit)[2] == [-1, -1, -1]
    # A slot for each file opened: its size and one byte (a /proc file says 0 bytes).
    assert len(raw) == sum(
        os.path.getsize(path) + 1 if kind in ("text", "empty") else kind == "proc"
        for (path, _, _), kind in zip(items, kinds, strict=True)
    )


def test_the_compiled_reads_refuse_a_bad_item_and_close_nothing_else(tmp_path: Path) -> None:
    # An item that is not a tuple is a TypeError, before any file is opened, and no
    # descriptor of the process (fd 0 above all) is closed on the way out.
    from sif.index import scan

    assert scan._readc is not None
    write(tmp_path / "a", b"some bytes")
    good = triple(tmp_path / "a")
    if not os.path.exists("/proc/self/fd/0"):  # a runner without stdin: fd 0 is this one
        os.open(os.devnull, os.O_RDONLY)
    before = sorted(os.listdir("/proc/self/fd"))
    kept = os.open(tmp_path / "a", os.O_RDONLY)
    try:
        with pytest.raises(TypeError):
            scan._readc.read_files([good, [good[0], good[1], good[2]], good], 1 << 20)
        with pytest.raises(TypeError):
            scan._readc.read_files([good, ("x", 1)], 1 << 20)
        os.fstat(0)  # still open
        os.fstat(kept)
    finally:
        os.close(kept)
    assert sorted(os.listdir("/proc/self/fd")) == before


MAGICS = [
    b"\x1f\x8b",
    b"\xfd7zXZ\x00",
    b"\x28\xb5\x2f\xfd",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"\x7fELF",
    b"BZh91AY&SY",
    b"BZh1\x17rE8P\x90",
    b"BZh01AY&SY",  # not bzip2: the digit must be 1-9
    b"%!",
    b"\xef\xbb\xbf%!",
    b"\x04%!",
    b"\xef\xbb\xbf",
]


@st.composite
def heads(draw: st.DrawFn) -> bytes:
    """Bytes that meet every branch of the sniffing: magic numbers (whole or cut), a tar
    header's ``ustar`` at 257, NULs, control bytes around the 30% line, UTF-8."""
    if draw(st.integers(0, 3)) == 0:  # one byte value at the 30% line: its class decides
        n = draw(st.integers(1, 300))
        k = int(0.3 * n) + draw(st.integers(0, 1))
        byte = bytes([draw(st.integers(1, 255))])
        return byte * k + b"a" * (n - k)
    prefix = draw(st.sampled_from([b"", *MAGICS]))
    prefix = prefix[: draw(st.integers(0, len(prefix)))] if draw(st.booleans()) else prefix
    controls = bytes([*range(32), 127])
    alphabet = draw(st.sampled_from([b"ab \n", controls + b"ab", b"\x00a", b"\xc3\xa9e"]))
    if draw(st.booleans()):
        body = draw(st.lists(st.sampled_from(list(alphabet)), max_size=300).map(bytes))
    else:
        body = draw(st.binary(max_size=400))
    head = prefix + body
    if draw(st.booleans()):  # a tar header's magic (the head made long enough for it)
        head = head.ljust(257, b"a")[:257] + b"ustar" + head[262:]
    return head


@pytest.mark.skipif(scan._readc is None, reason="the C reads are not built")
@settings(max_examples=300, deadline=None)
@given(st.lists(heads(), max_size=12), st.sampled_from(["auto", "raw", "unpack"]))
def test_the_batch_kinds_are_plain_kind_s(blobs: list[bytes], mode: str) -> None:
    # head_classes (C, one pass) against sif.content.plain_kind a file at a time, on the
    # same buffer; a file not read (length -1) is never kept.
    from sif.content import plain_kind

    raw = bytearray()
    slots, lengths = [], []
    for k, blob in enumerate(blobs):
        slots.append(len(raw))
        raw += blob + b"\xff"  # a slot a byte larger than its file, as read_files makes it
        lengths.append(-1 if k % 5 == 4 else len(blob))
    files = [(f"f{k}", 0, 0) for k in range(len(blobs))]
    expected = [
        (k, kind)
        for k, blob in enumerate(blobs)
        if lengths[k] >= 0 and (kind := plain_kind(blob[:8192], f"f{k}", mode)) is not None
    ]
    index, kinds = scan._plain_kinds(raw, slots, lengths, files, mode)
    assert list(zip(index, kinds, strict=True)) == expected


def test_the_batch_kinds_of_long_heads_look_at_the_first_8192_bytes() -> None:
    # Control bytes past the sample do not make a file binary; within it they do.
    from sif.content import plain_kind

    text, odd = b"a" * 8192, b"\x01" * 8192
    blobs = [text + odd, odd + text, b"\x01" * 2457 + b"a" * 5735, b"\x01" * 2458 + b"a" * 5734]
    raw = bytearray(b"".join(b + b"\0" for b in blobs))
    slots = [0]
    for b in blobs[:-1]:
        slots.append(slots[-1] + len(b) + 1)
    lengths = [len(b) for b in blobs]
    files = [(f"f{k}", 0, 0) for k in range(len(blobs))]
    index, kinds = scan._plain_kinds(raw, slots, lengths, files, "auto")
    assert index == [0, 1, 2, 3]
    assert kinds == [plain_kind(b[:8192], "", "auto") for b in blobs]
    assert kinds == ["text", "binary", "text", "binary"]


@pytest.mark.skipif(scan._readc is None, reason="the C reads are not built")
@pytest.mark.parametrize("mode", ["auto", "raw"])
def test_the_batch_kinds_class_every_byte_value_as_plain_kind_does(mode: str) -> None:
    # Each value 1-255 as 31% of a head (binary when it is a control byte) and as 29%.
    from sif.content import plain_kind

    blobs = [bytes([v]) * k + b"a" * (100 - k) for v in range(1, 256) for k in (29, 31)]
    raw = bytearray(b"".join(blobs))
    slots = list(range(0, 100 * len(blobs), 100))
    files = [(f"f{k}", 0, 0) for k in range(len(blobs))]
    index, kinds = scan._plain_kinds(raw, slots, [100] * len(blobs), files, mode)
    expected = [(k, plain_kind(b, "", mode)) for k, b in enumerate(blobs)]
    assert list(zip(index, kinds, strict=True)) == [e for e in expected if e[1] is not None]


def test_a_c_module_built_before_head_classes_falls_back_to_plain_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An older _readc (the source updated, not rebuilt): the kinds a file at a time.
    monkeypatch.setattr(scan, "_readc", object())
    raw = bytearray(b"text\n\xff\x00bin\xff\x1f\x8bgz\xff")
    index, kinds = scan._plain_kinds(raw, [0, 6, 11], [5, 4, 4], [("a", 0, 0)] * 3, "auto")
    assert (index, kinds) == ([0, 1], ["text", "binary"])
