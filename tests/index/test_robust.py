"""SIGKILL during `sif index`, and queries from other processes while a writer works."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sif.errors import IndexUnusable
from sif.fingerprint import make_params
from sif.index import build_index, open_reader, open_store
from sif.index.scan import scan_file
from sif.index.store import NewFile
from treeutil import fill, write


def make_tree(root: Path, n: int, size: int) -> None:
    rng = np.random.default_rng(7)
    for i in range(n):
        write(root / f"d{i % 10}" / f"f{i:04d}", rng.integers(97, 123, size, np.uint8).tobytes())


def snapshot(idx: Path) -> dict[str, tuple[int, int]]:
    reader = open_reader(idx)
    if not reader.parameter_sets():  # opened, nothing committed yet
        return {}
    params = reader.parameter_sets()[0]
    files = reader.describe(params, np.arange(1, 100_000, dtype=np.uint32))
    return {f.path: (f.size, f.n_fp) for f in files.values()}


def test_kill_9_at_any_moment_leaves_a_consistent_index(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    make_tree(tree, 600, 20_000)
    clean = tmp_path / "clean"
    build_index([tree], clean, jobs=2)
    want = snapshot(clean)
    idx = tmp_path / "idx"
    cmd = [sys.executable, "-m", "sif", "index", "-q", "--index", str(idx)]
    cmd += ["--checkpoint-bytes", "300000", str(tree)]
    seen_partial = False
    for delay in (0.0, 0.1, 0.4, 0.9):
        proc = subprocess.Popen(cmd, start_new_session=True)
        # Kill at various moments once a reader sees a partial index (a fixed delay
        # would depend on how fast this host indexes: all or nothing).
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if 0 < len(snapshot(idx)) < len(want):
                    break
            except IndexUnusable:
                pass
            time.sleep(0.01)
        time.sleep(delay)
        # (it may have finished first: the checks below still hold)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the command and its workers
        proc.wait()
        try:
            got = snapshot(idx)  # what a reader sees right after the kill
        except IndexUnusable:
            got = {}  # killed before the first commit
        # consistent: every file it names is complete and right
        assert all(want[p] == v for p, v in got.items())
        seen_partial |= 0 < len(got) < len(want)
    assert seen_partial  # some kill landed mid-run
    stats = build_index([tree], idx, jobs=2)  # the next run completes the work
    assert stats.new + stats.unchanged == 600 and stats.changed == 0
    assert snapshot(idx) == want
    with open_store(idx) as store:  # type: ignore[attr-defined]
        con = store.catalog()
        assert con.execute("SELECT count(*) FROM files").fetchone() == (600,)
        names = {r[0] for r in con.execute("SELECT name FROM segments").fetchall()}
        assert names == set(os.listdir(idx / "segments"))  # no orphan left


def test_query_from_another_process_reads_the_last_committed_state(tmp_path: Path) -> None:
    make_tree(tmp_path / "t", 5, 8000)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    probe = tmp_path / "probe.txt"
    probe.write_bytes(b"a passage that only the new file holds, long enough to count. " * 100)
    query = [sys.executable, "-m", "sif", "query", "--index", str(idx), "-t", "50", str(probe)]
    store = open_store(idx)  # a writer holds the lock and the DuckDB catalog open
    try:
        out = subprocess.run(query, capture_output=True, check=True).stdout.decode()
        assert out.splitlines()[1:] == []  # nothing matches yet
        other = tmp_path / "t" / "new.txt"
        other.write_bytes(probe.read_bytes())
        st = other.stat()
        scan = scan_file(other, make_params())
        store.commit(make_params(), None, [NewFile(str(other), st.st_dev, st.st_ino, 0, scan)], [])
        out = subprocess.run(query, capture_output=True, check=True).stdout.decode()
        assert out.splitlines()[1].endswith(f"{other} {st.st_size}  (exact copy)")
    finally:
        store.close()


def test_files_under_a_directory_the_run_cannot_read_stay_indexed() -> None:
    """A directory made unreadable since the last run: its files are not known to be gone,
    and keep their entries (they were dropped as removed, and a query no longer found
    them). A file that is gone still goes."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="sif-locked-", dir="/tmp"))
    try:
        os.chmod(base, 0o777)
        text = b"lines of words that two copies share, well past a window or two\n" * 60
        for name in ("open/f.txt", "open/gone.txt", "locked/copy.txt"):
            write(base / name, text + name.encode())
        for p in [base / "open", base / "locked", *base.rglob("*.txt")]:
            os.chown(p, 65534, 65534)
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        env = {**os.environ, "HOME": str(base)}

        def index() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*drop, sys.executable, "-m", "sif", "index", "--index", "idx", "open", "locked"],
                cwd=base, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        assert index().returncode == 0
        os.chmod(base / "locked", 0)
        (base / "open" / "gone.txt").unlink()
        done = index()
        assert done.returncode == 1, done.stderr
        assert "locked: permission denied" in done.stderr
        assert "0 new, 0 changed, 1 unchanged, 1 removed" in done.stderr
        found = subprocess.run(  # as root, who may read it: the entry is there
            [sys.executable, "-m", "sif", "query", "--index", "idx", "open/f.txt"],
            cwd=base, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert found.returncode == 0, found.stderr
        assert "locked/copy.txt" in found.stdout and "gone.txt" not in found.stdout
    finally:
        os.chmod(base / "locked", 0o755)
        shutil.rmtree(base)


def test_a_full_disk_while_a_segment_is_written_leaves_no_part_of_it(tmp_path: Path) -> None:
    """The index on a file system that fills up as a segment is written: one line, exit 3,
    and the part written is gone with the run (it stayed, the disk full, until the next
    run removed it)."""
    from actionutil import tmpfs

    rng = np.random.default_rng(5)
    write(tmp_path / "small" / "f.txt", b"a first file, to make the catalog, of some words\n" * 9)
    for i in range(40):  # ~1.6 MB of text: ~8 k fingerprint rows, more than the room left
        words = rng.integers(0, 50_000, 8_000)
        write(tmp_path / "t" / f"f{i}.txt", " ".join(map(str, words.tolist())).encode())
    with tmpfs("16m") as d:

        def index(tree: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "sif", "index", "-q", "--index", str(d / "idx"), tree],
                cwd=tmp_path, capture_output=True, text=True, timeout=300,
            )  # fmt: skip

        assert index("small").returncode == 0
        fill(d, leave=24 * 1024)  # less room than the segment takes
        done = index("t")
        assert done.returncode == 3, done.stderr
        assert "no space left on device" in done.stderr.lower()
        left = [p.name for p in (d / "idx" / "segments").iterdir()]
        assert not [n for n in left if n.endswith(".tmp")], left


def test_a_first_run_stopped_before_its_catalog_held_anything_is_no_index_yet(
    tmp_path: Path,
) -> None:
    """Ctrl-C in the first run's first migration: --info and --verify say there is no
    index yet (they said 'index corrupt ... run with --rebuild'); the next run makes it."""
    write(tmp_path / "t" / "f.txt", b"text of a file, long enough to fingerprint, fifty+\n")
    stop = (
        "import sys\n"
        "import sif.index.catalogdb as c\n"
        "v, name, step = c.MIGRATIONS[0]\n"
        "def stopped(con, secret):\n"
        "    step(con, secret)\n"
        "    raise KeyboardInterrupt\n"
        "c.MIGRATIONS[0] = (v, name, stopped)\n"
        "sys.argv = ['sif', 'index', '-q', '--index', 'idx', 't']\n"
        "from sif.cli import main\n"
        "main()\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    assert run("-c", stop).returncode == 130
    for what in ("--info", "--verify"):
        done = run("-m", "sif", "index", what, "--index", "idx")
        assert done.returncode == 3
        assert "yet: its first run did not finish" in done.stderr, done.stderr
        assert "corrupt" not in done.stderr
    assert run("-m", "sif", "index", "-q", "--index", "idx", "t").returncode == 0
    assert run("-m", "sif", "index", "--verify", "--index", "idx").returncode == 0
