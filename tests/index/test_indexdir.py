"""The index directory: its marker, what sif deletes, rebuilds, the lock, errors writing it.

Run as root (CI is root): the permission tests drop to ``nobody``, the
no-space test mounts a small tmpfs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sif.errors import ConfigError, IndexCorrupt, IndexInUse
from sif.index import build_index, open_reader, open_store
from sif.index.duck import DuckStore
from sif.index.indexdir import (
    LEFTOVER_PREFIXES,
    MANIFEST_NAME,
    MARKER,
    SEGMENT_NAME,
    is_own_name,
)
from treeutil import write


def sif(
    *args: str | Path, user: str | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """``python -m sif ARGS`` in a child process (as ``user``): (status, stdout, stderr)."""
    cmd = [sys.executable, "-m", "sif", *map(str, args)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def one_line(err: str) -> str:
    """The one line of ``err``, which must hold no traceback."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def texts(root: Path, n: int, size: int = 6000, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for i in range(n):
        write(root / f"d{i % 3}" / f"f{i:03d}.txt", rng.integers(97, 123, size, np.uint8).tobytes())


def indexed(idx: Path) -> set[str]:
    reader = open_reader(idx)
    try:
        sets = reader.parameter_sets()
        if not sets:
            return set()
        files = reader.describe(sets[0], np.arange(1, 100_000, dtype=np.uint32))
        return {f.path for f in files.values()}
    finally:
        reader.close()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory that ``nobody`` can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="sif-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --- the marker, and deleting only sif's own files ------------------------------------


def test_rebuild_deletes_only_what_sif_wrote(tmp_path: Path) -> None:
    texts(tmp_path / "t", 4)
    idx = tmp_path / "idx"
    assert sif("index", "-q", "-j1", "--index", idx, tmp_path / "t")[0] == 0
    assert (idx / MARKER).read_text().splitlines()[0] == "sif-index 1"
    write(idx / "notes.txt", b"mine")
    write(idx / "mine" / "data.bin", b"also mine")
    code, _, err = sif("index", "-q", "-j1", "--rebuild", "--index", idx, tmp_path / "t")
    assert code == 0, err
    assert (idx / "notes.txt").read_bytes() == b"mine"
    assert (idx / "mine" / "data.bin").read_bytes() == b"also mine"
    assert len(indexed(idx)) == 4
    assert os.listdir(idx / "tmp") == []  # the rebuild's staging directory is gone


_NAME = st.text("abcxyz019._-", min_size=1, max_size=10).filter(lambda n: n not in (".", ".."))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    top=st.sets(_NAME.filter(lambda n: not is_own_name(n)), max_size=4),
    in_segments=st.sets(_NAME.filter(lambda n: not SEGMENT_NAME.match(n)), max_size=3),
    in_manifests=st.sets(_NAME.filter(lambda n: not MANIFEST_NAME.match(n)), max_size=3),
    in_tmp=st.sets(_NAME.filter(lambda n: not n.startswith(LEFTOVER_PREFIXES)), max_size=3),
)
def test_index_runs_never_delete_a_name_sif_does_not_write(
    tmp_path_factory: pytest.TempPathFactory,
    top: set[str],
    in_segments: set[str],
    in_manifests: set[str],
    in_tmp: set[str],
) -> None:
    base = tmp_path_factory.mktemp("foreign")
    texts(base / "t", 3)
    idx = base / "idx"
    build_index([base / "t"], idx, jobs=1)
    planted = [idx / n for n in top] + [idx / "segments" / n for n in in_segments]
    planted += [idx / "manifests" / n for n in in_manifests]
    planted += [idx / "tmp" / n for n in in_tmp]
    for path in planted:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"not sif's")
    write(base / "t" / "new.txt", b"one more file " * 100)
    build_index([base / "t"], idx, jobs=1)  # an update (commit, publish, retire)
    build_index([base / "t"], idx, jobs=1, rebuild=True)
    assert all(p.read_bytes() == b"not sif's" for p in planted)
    assert len(indexed(idx)) == 4


def test_what_a_killed_similar_run_left_in_tmp_goes_at_the_next_writer(tmp_path: Path) -> None:
    # sif similar's spilled pairs and small-pass table, left by a kill (the OOM killer at
    # the run's memory peak): the next writer (holding the lock no live run holds) removes
    # them, and nothing else in tmp/.
    from sif.similar.smallpass import TABLE_PREFIX
    from sif.similar.spill import SPILL_PREFIX

    assert SPILL_PREFIX in LEFTOVER_PREFIXES and TABLE_PREFIX in LEFTOVER_PREFIXES
    texts(tmp_path / "t", 2)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    left = [idx / "tmp" / f"{SPILL_PREFIX}a1b2", idx / "tmp" / f"{TABLE_PREFIX}c3d4"]
    for d in left:
        write(d / "0.npy", b"x" * 1000)
    write(idx / "tmp" / "pairs-of-mine" / "keep.npy", b"not sif's")
    build_index([tmp_path / "t"], idx, jobs=1)
    assert not any(d.exists() for d in left)
    assert (idx / "tmp" / "pairs-of-mine" / "keep.npy").read_bytes() == b"not sif's"


def test_a_non_empty_directory_without_the_marker_is_refused(tmp_path: Path) -> None:
    texts(tmp_path / "t", 2)
    home = tmp_path / "home"
    write(home / "thesis.tex", b"years of work")
    for extra in ((), ("--rebuild",)):
        code, _, err = sif("index", "-j1", *extra, "--index", home, tmp_path / "t")
        assert code == 3
        line = one_line(err)
        assert str(home) in line and "not a sif index directory" in line and MARKER in line
        assert os.listdir(home) == ["thesis.tex"]  # nothing written, nothing deleted


def test_a_creation_stopped_before_the_marker_is_taken_up_again(tmp_path: Path) -> None:
    """Ctrl-C after the lock file was made but before the marker: the next run goes on
    (found by interrupting ``sif index`` at random moments under load)."""
    texts(tmp_path / "t", 2)
    idx = tmp_path / "idx"
    write(idx / "lock", b"")
    write(idx / f"{MARKER}.tmpa1b2c3", b"")
    stats = build_index([tmp_path / "t"], idx, jobs=1)
    assert stats.new == 2 and (idx / MARKER).is_file()
    # A directory holding anything else is still refused.
    other = tmp_path / "other"
    write(other / "lock", b"")
    write(other / "notes.txt", b"mine")
    code, _, err = sif("index", "-j1", "--index", other, tmp_path / "t")
    assert code == 3 and "not a sif index directory" in one_line(err)
    assert sorted(os.listdir(other)) == ["lock", "notes.txt"]


def test_an_index_made_before_the_marker_is_adopted(tmp_path: Path) -> None:
    texts(tmp_path / "t", 3)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    (idx / MARKER).unlink()  # as sif wrote it before the marker
    write(tmp_path / "t" / "new.txt", b"one more file " * 100)
    stats = build_index([tmp_path / "t"], idx, jobs=1)
    assert (stats.new, stats.unchanged) == (1, 3)
    assert (idx / MARKER).is_file()
    # ... but not when it holds anything sif does not write
    (idx / MARKER).unlink()
    write(idx / "README", b"not sif's")
    code, _, err = sif("index", "-j1", "--rebuild", "--index", idx, tmp_path / "t")
    assert code == 3 and "not a sif index directory" in one_line(err)
    assert not (idx / MARKER).exists() and len(indexed(idx)) == 4  # the old state, intact


def test_a_nonexistent_root_creates_nothing(tmp_path: Path) -> None:
    idx = tmp_path / "new"
    with pytest.raises(ConfigError, match="typo"):
        build_index([tmp_path / "typo"], idx, jobs=1)
    code, _, err = sif("index", "-j1", "--index", idx, tmp_path / "typo")
    assert code == 2 and str(tmp_path / "typo") in err and "Traceback" not in err
    assert not idx.exists()


# --- a rebuild is built beside the old index ------------------------------------------


def test_queries_during_a_rebuild_answer_from_the_old_index(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    texts(old, 6, seed=1)
    texts(new, 900, size=20_000, seed=2)
    idx = tmp_path / "idx"
    build_index([old], idx, jobs=1)
    probe = tmp_path / "probe.txt"
    probe.write_bytes((old / "d0" / "f000.txt").read_bytes())
    query = ("query", "--index", idx, "-t", "50", probe)

    def answers() -> list[str]:
        code, out, err = sif(*query)
        assert code == 0, err
        return out.splitlines()[1:]  # the matches, after the line of the query

    before = answers()
    assert any(str(old / "d0" / "f000.txt") in line for line in before)
    rebuild = [sys.executable, "-m", "sif", "index", "-q", "-j1", "--rebuild"]
    rebuild += ["--checkpoint-bytes", "200000", "--index", str(idx), str(new)]
    proc = subprocess.Popen(rebuild, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        staged: list[Path] = []
        while not staged and time.monotonic() < deadline and proc.poll() is None:
            staged = list((idx / "tmp").glob("rebuild-*/segments/seg-*"))
            time.sleep(0.02)
        assert staged, "the rebuild never committed a checkpoint"
        os.killpg(proc.pid, signal.SIGSTOP)  # stopped at a checkpoint, mid-rebuild
        assert answers() == before  # a second process reads the old state
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert answers() == before  # killed: still the old state
    code, _, err = sif("index", "-q", "-j1", "--rebuild", "--index", idx, new)
    assert code == 0, err  # the next run completes
    assert len(indexed(idx)) == 900
    assert answers() == []  # the probe's tree is no longer indexed
    assert os.listdir(idx / "tmp") == []
    with DuckStore(str(idx)) as store:  # no segment left of the old index
        named = {r[0] for r in store.catalog().execute("SELECT name FROM segments").fetchall()}
    assert named == set(os.listdir(idx / "segments"))


# --- the index never indexes itself -----------------------------------------------------


def test_the_index_inside_the_tree_is_never_walked(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    texts(tree, 3)
    idx = tree / "sub" / "idx"
    for _ in range(2):  # the second run would meet the first one's files
        code, _, err = sif("index", "-q", "-j2", "--index", idx, tree)
        assert code == 0, err
    assert len(indexed(idx)) == 3 and not any("/idx/" in p for p in indexed(idx))
    code, out, err = sif("similar", "-j1", "--format", "json", "--index", idx, tree)
    assert code == 0, err
    assert "/idx/" not in out
    with DuckStore(str(idx), read_only=True) as store:
        assert store.catalog().execute("SELECT count(*) FROM files").fetchone() == (3,)
    # the default location under the indexed tree (as with `sif index ~`)
    shutil.rmtree(tree / "sub")  # another index is only files
    env = {"XDG_CACHE_HOME": str(tree / ".cache"), "SIF_INDEX": ""}
    assert sif("index", "-q", "-j1", tree, env=env)[0] == 0
    assert sif("index", "-q", "-j1", tree, env=env)[0] == 0
    default = tree / ".cache" / "sif" / "index"
    assert (default / MARKER).exists()
    assert indexed(default) == {str(p) for p in tree.glob("d*/*.txt")}


# --- the lock -----------------------------------------------------------------------


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_lock_that_is_a_symlink_or_a_directory_is_refused(tmp_path: Path, rebuild: bool) -> None:
    texts(tmp_path / "t", 2)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    extra = ("--rebuild",) if rebuild else ()
    (idx / "lock").unlink()
    (idx / "lock").symlink_to(victim)
    code, _, err = sif("index", "-j1", *extra, "--index", idx, tmp_path / "t")
    line = one_line(err)
    assert code == 3 and f"index corrupt: {idx}/lock" in line and "by hand" in line
    assert victim.read_bytes() == b"precious" and (idx / "lock").is_symlink()
    (idx / "lock").unlink()
    (idx / "lock").mkdir()
    code, _, err = sif("index", "-j1", *extra, "--index", idx, tmp_path / "t")
    assert code == 3 and f"index corrupt: {idx}/lock" in one_line(err)
    assert (idx / "lock").is_dir()


def test_temporaries_are_never_written_through_a_planted_link(tmp_path: Path) -> None:
    texts(tmp_path / "t", 2)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (idx / "segments" / "seg-000002.tmp").symlink_to(elsewhere)  # the old predictable name
    write(tmp_path / "t" / "new.txt", b"one more file " * 100)
    assert build_index([tmp_path / "t"], idx, jobs=1).new == 1
    assert os.listdir(elsewhere) == []
    assert len(indexed(idx)) == 3


def test_read_only_opens_share_the_lock(tmp_path: Path) -> None:
    texts(tmp_path / "t", 2)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    first = DuckStore(str(idx), read_only=True)
    try:
        with DuckStore(str(idx), read_only=True) as second:  # two re-thresholds at once
            assert second.catalog().execute("SELECT count(*) FROM files").fetchone() == (2,)
        with pytest.raises(IndexInUse, match="being read by another sif"):  # no writer now
            open_store(idx)
        # a re-threshold of `sif similar` while another holds the catalog read-only
        code, _, err = sif("similar", "-j1", "--index", idx, tmp_path / "t")
        assert code == 3 and "index in use" in err  # the first run must write the pairs
    finally:
        first.close()
    assert sif("similar", "-j1", "--index", idx, tmp_path / "t")[0] == 0
    first = DuckStore(str(idx), read_only=True)
    try:
        code, _, err = sif("similar", "-j1", "-t", "10", "--index", idx, tmp_path / "t")
        assert code == 0, err
    finally:
        first.close()
    with DuckStore(str(idx)), pytest.raises(IndexInUse):
        DuckStore(str(idx), read_only=True)


# --- layout entries of the wrong kind ---------------------------------------------------


@pytest.mark.parametrize("name", ["tmp", "segments", "manifests"])
def test_a_layout_directory_that_is_a_file_is_corrupt_and_rebuild_recovers(
    tmp_path: Path, name: str
) -> None:
    texts(tmp_path / "t", 3)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    path = idx / name
    shutil.rmtree(path) if path.exists() else None
    path.write_bytes(b"not a directory")
    for cmd in ("index", "similar"):
        code, _, err = sif(cmd, "-j1", "--index", idx, tmp_path / "t")
        line = one_line(err)
        assert code == 3, line
        assert f"index corrupt: {path} (a plain file, not a directory); run with --rebuild" in line
    code, _, err = sif("index", "-q", "-j1", "--rebuild", "--index", idx, tmp_path / "t")
    assert code == 0, err
    assert path.is_dir() or not path.exists()
    assert len(indexed(idx)) == 3
    assert sif("similar", "-j1", "--index", idx, tmp_path / "t")[0] == 0


def test_the_marker_is_never_replaced(tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    write(idx / MARKER, b"something else\n")
    with pytest.raises(IndexCorrupt, match="not a sif index marker"):
        open_store(idx, rebuild=True)
    assert (idx / MARKER).read_bytes() == b"something else\n"


# --- permission denied, as nobody -------------------------------------------------------


def test_permission_denied_creating_the_index_directory(shared_tmp: Path) -> None:
    texts(shared_tmp / "t", 2)
    shared_tmp.joinpath("t").chmod(0o755)
    idx = shared_tmp / "idx"
    code, _, err = sif("index", "-j1", "--index", idx, shared_tmp / "t", user="nobody")
    line = one_line(err)
    assert code == 3 and f"cannot create the index directory {idx}" in line
    assert "Permission denied" in line and not idx.exists()


def test_permission_denied_writing_the_index(shared_tmp: Path) -> None:
    tree = shared_tmp / "t"
    texts(tree, 2)
    idx = shared_tmp / "idx"
    build_index([tree], idx, jobs=1)
    subprocess.run(["chmod", "-R", "a+rX", str(shared_tmp)], check=True)
    code, _, err = sif("index", "-j1", "--index", idx, tree, user="nobody")
    line = one_line(err)
    assert code == 3 and f"cannot write the index {idx}" in line and "Permission denied" in line


def test_a_read_only_index_answers_a_re_threshold(shared_tmp: Path) -> None:
    tree = shared_tmp / "t"
    texts(tree, 3, seed=4)
    write(tree / "copy.txt", (tree / "d0" / "f000.txt").read_bytes())
    subprocess.run(["chmod", "-R", "a+rX", str(tree)], check=True)  # before: chmod sets ctime
    idx = shared_tmp / "idx"
    code, want, err = sif("similar", "-j1", "--index", idx, tree)
    assert code == 0 and "copy.txt" in want, err
    code, out, err = sif("similar", "-j1", "--index", idx, tree, user="nobody")
    assert code == 0, err
    assert out == want
    assert sif("query", "--index", idx, tree / "copy.txt", user="nobody")[0] == 0
    write(tree / "new.txt", b"a new file that must be indexed first " * 100)
    code, _, err = sif("similar", "-j1", "--index", idx, tree, user="nobody")
    line = one_line(err)
    assert code == 3 and f"cannot write the index {idx}" in line and "Permission denied" in line


# --- no space left on device --------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (root only; CI runs as root). Failing to mount fails the test."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.mark.parametrize("jobs", ["-j1", "-j2"])  # -j2: the checkpoints commit in a thread
def test_no_space_left_keeps_the_last_committed_state(
    tmp_path: Path, small_fs: Path, jobs: str
) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    texts(small, 3, seed=5)
    texts(big, 400, size=30_000, seed=6)
    idx = small_fs / "idx"
    assert sif("index", "-q", "-j1", "--index", idx, small)[0] == 0
    before = indexed(idx)
    filler = small_fs / "filler"
    with open(filler, "wb") as f:  # leave the index about 150 KB
        f.write(b"\0" * (os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize - 150_000))
    code, _, err = sif("index", jobs, "--rebuild", "--index", idx, small, big)
    assert code == 3 and "No space left on device" in one_line(err)
    assert indexed(idx) == before and os.listdir(idx / "tmp") == []  # the rebuild is dropped
    code, _, err = sif("index", jobs, "--checkpoint-bytes", "300000", "--index", idx, small, big)
    line = one_line(err)
    assert code == 3 and f"cannot write the index {idx}" in line
    assert "No space left on device" in line and "last committed state" in line
    after = indexed(idx)  # the state of a finished commit: the old one, or a checkpoint
    assert before <= after and all(p.startswith(str(big)) for p in after - before)
    code, out, _ = sif("query", "--index", idx, "-t", "50", small / "d0" / "f000.txt")
    assert code == 0 and str(small / "d0" / "f000.txt") in out
    filler.unlink()
    code, _, err = sif("index", "-q", "-j1", "--index", idx, small, big)
    assert code == 0, err
    assert len(indexed(idx)) == 403
    code, out, _ = sif("query", "--index", idx, "-t", "50", big / "d1" / "f001.txt")
    assert code == 0 and str(big / "d1" / "f001.txt") in out
