"""Invariants of the segment checks: damage is IndexCorrupt or caught by the checksum,
never another exception (hypothesis over damaged files), in both segment layouts."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sif.errors import IndexCorrupt, IndexUnusable
from sif.index.checks import checksum_files, load_array, verify_segment
from sif.index.segments import BUCKET_MIN_ROWS, Segment, make_files, write_segment


def segment(directory: Path, rows: int, n_files: int) -> None:
    rng = np.random.default_rng(rows)
    values = rng.integers(0, 1 << 32, rows, dtype=np.uint64).astype(np.uint32)
    local = rng.integers(0, n_files, rows).astype(np.uint32)
    recs = [(i + 1, 0, 1, 1, 10, 0, i, 0, b"\0" * 32) for i in range(n_files)]
    paths = [f"/some/dir/file{i:05d}.txt".encode() for i in range(n_files)]
    write_segment(str(directory), make_files(recs, paths), values, local)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("small") / "seg"
    segment(d, 3000, 200)
    return d


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("big") / "seg"
    segment(d, BUCKET_MIN_ROWS + 100, 300)
    assert (d / "offsets.npy").exists()
    return d


def use(directory: Path) -> None:
    """Everything a query does with a segment."""
    seg = Segment(str(directory))
    try:
        seg.lookup(np.unique(np.asarray(seg.all_rows()[0][:500])))
        for pos in range(0, len(seg.files), 37):
            seg.path(pos)
        seg.position(np.arange(0, 400, dtype=np.uint32))
    finally:
        seg.close()


@pytest.mark.parametrize("layout", ["small", "bucketed"])
def test_every_zero_byte_file_is_named(
    request: pytest.FixtureRequest, tmp_path: Path, layout: str
) -> None:
    pristine: Path = request.getfixturevalue(layout)
    for name in sorted(os.listdir(pristine)):
        d = tmp_path / name
        shutil.copytree(pristine, d)
        (d / name).write_bytes(b"")
        with pytest.raises(IndexCorrupt, match=rf"index corrupt: {d}.*run with --rebuild"):
            use(d)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damage_is_index_corrupt_or_caught_by_the_checksum(
    small: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    names = sorted(os.listdir(small))
    name = data.draw(st.sampled_from(names))
    d = tmp_path_factory.mktemp("d") / "seg"
    shutil.copytree(small, d)
    raw = bytearray((d / name).read_bytes())
    kind = data.draw(st.sampled_from(["flip", "cut", "garbage"]))
    if kind == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        at = data.draw(st.integers(0, len(raw) - 1))
        if kind == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        else:
            junk = data.draw(st.binary(min_size=1, max_size=64))
            raw[at : at + len(junk)] = junk
    (d / name).write_bytes(bytes(raw))
    check = checksum_files(str(small))
    changed = (d / name).read_bytes() != (small / name).read_bytes()
    with contextlib.suppress(IndexCorrupt):
        use(d)  # a query either works or names the damage: never another exception
    if changed:
        with pytest.raises(IndexCorrupt):
            verify_segment(str(d), check)
    else:
        verify_segment(str(d), check)


@pytest.mark.parametrize("err", [errno.EMFILE, errno.EACCES])
def test_an_array_the_process_cannot_open_is_not_called_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    # "run with --rebuild" would be wrong advice for a low `ulimit -n` (sif query said it).
    from sif.errors import IndexUnusable
    from sif.index import checks

    path = tmp_path / "fp.npy"
    np.save(path, np.arange(10, dtype=np.uint32))
    assert len(checks.load_array(str(path), [np.dtype(np.uint32)])) == 10

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(checks, "open", refuse, raising=False)
    with pytest.raises(IndexUnusable) as caught:
        checks.load_array(str(path), [np.dtype(np.uint32)])
    assert not isinstance(caught.value, IndexCorrupt)
    assert str(caught.value) == f"{path}: {os.strerror(err)}"


def test_running_out_of_descriptors_is_no_damage(tmp_path: Path) -> None:
    """Out of file descriptors while an array is mapped (the header's open got one, the
    mapping's dup none): the process's limit, not corruption, and no advice to rebuild.
    Under ``ulimit -n`` sif index said 'index corrupt: fid.npy (...Too many open
    files); run with --rebuild'."""
    import resource

    path = tmp_path / "a.npy"
    np.save(path, np.arange(100, dtype=np.uint32))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        with contextlib.suppress(OSError):
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        os.close(held.pop())  # one left: the header's open, closed again, then the mapping's
        with pytest.raises(IndexUnusable, match="Too many open files") as caught:
            load_array(str(path), (np.dtype(np.uint32),))
        assert not isinstance(caught.value, IndexCorrupt)
        assert isinstance(caught.value.__cause__, OSError)
        assert caught.value.__cause__.errno == errno.EMFILE
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
