"""``--engine dask``: the same catalog and the same pairs as the embedded engine.

A real ``LocalCluster`` of two worker processes (one for the whole module:
starting one costs seconds), real files, real on-disk indexes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionutil import sif as sif_as
from actionutil import tool
from sif.errors import WorkerDied
from sif.events import NullProgress, ScanWarning
from sif.executors.dask import DaskEngine
from sif.index import build_index
from sif.index.build import DEFAULT_PARAMS
from sif.index.duck import DuckStore
from sif.index.pairs import DuckPairs
from sif.index.pairstore import BUCKETS
from sif.similar import SimilarOptions, find_similar
from textgen import text
from treeutil import write


@pytest.fixture(scope="module")
def engine() -> Iterator[DaskEngine]:
    eng = DaskEngine(workers=2, memory_limit="1GB", timeout=60)
    try:
        assert eng.workers() == 2
        yield eng
    finally:
        eng.close()


def tree(root: Path, families: int = 5, versions: int = 4) -> None:
    """Families of versions, a boilerplate shared by many, a zip, a gzip, tiny twins."""
    boiler = text(7, 2500)
    for f in range(families):
        body = text(300 + f, 6000)
        for v in range(versions):
            cut = (v * 733) % 5000
            data = body[:cut] + text(3000 + 10 * f + v, 600) + body[cut:]
            write(root / f"fam{f}/v{v}.txt", (boiler if v % 2 else b"") + data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("inner/a.txt", text(300, 6000))
        z.writestr("inner/b.txt", text(301, 4000))
    write(root / "arch/pack.zip", buf.getvalue())
    write(root / "arch/doc.txt.gz", gzip.compress(text(302, 5000), mtime=0))
    write(root / "tiny/a.txt", b"twin\n")
    write(root / "tiny/b.txt", b"twin\n")


def catalog(index: Path, root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: (size, kind, view, digest, fingerprint count, its rows)."""
    pairs = DuckPairs(DuckStore(str(index), read_only=True))
    try:
        pid = pairs.params_id(DEFAULT_PARAMS)
        assert pid is not None
        files = pairs.scope(pid, [str(root)])
        source = pairs.scope_rows(pid, files)
        values, fids, _ = source.rows(0, BUCKETS)
        source.close()
    finally:
        pairs.close()
    out = {}
    for j, fid in enumerate(files["id"].tolist()):
        rows = sorted(values[fids == fid].tolist())
        out[os.fsdecode(bytes(files["path"][j]))] = (
            int(files["size"][j]),
            files["kind"][j],
            files["view"][j],
            bytes(files["digest"][j]),
            int(files["n_fp"][j]),
            tuple(rows),
        )
    return out


def described(result: Any) -> list[tuple[Any, ...]]:
    """The pairs by path, with every count and score (equality, not closeness)."""
    return sorted(
        (
            p.a.path,
            p.b.path,
            p.shared,
            p.a_in_b,
            p.b_in_a,
            p.exact_a_in_b,
            p.exact_b_in_a,
            p.a.n_fp,
            p.b.n_fp,
        )
        for p in result.pairs
    )


def test_both_engines_give_the_same_catalog_and_the_same_pairs(
    tmp_path: Path, engine: DaskEngine
) -> None:
    root = tmp_path / "t"
    tree(root)
    opts = SimilarOptions(threshold=10, max_df=4)
    here = find_similar([root], tmp_path / "embedded", options=opts, jobs=1)
    there = find_similar(  # 4 partitions: 4 tasks, their pairs summed in 4 splits
        [root], tmp_path / "dask", options=opts, jobs=1, engine=engine, partitions=4
    )
    want = catalog(tmp_path / "embedded", root)
    assert len(want) == 25 and any("!/inner/a.txt" in p for p in want)  # views as entries
    assert catalog(tmp_path / "dask", root) == want
    assert len(here.pairs) > 20 and here.stats.stopped > 0
    assert described(there) == described(here)
    assert (there.stats.fingerprints, there.stats.stopped, there.stats.pairs_collated) == (
        here.stats.fingerprints,
        here.stats.stopped,
        here.stats.pairs_collated,
    )
    # An update through the engine: one file changed, one new, one gone.
    write(root / "fam0/v0.txt", text(9, 7000))
    write(root / "fam9/new.txt", text(300, 6000))
    os.unlink(root / "fam1/v1.txt")
    build_index([root], tmp_path / "embedded", jobs=1)
    stats = build_index([root], tmp_path / "dask", jobs=1, engine=engine)
    assert (stats.new, stats.changed, stats.removed, stats.files_read) == (1, 1, 1, 2)
    assert catalog(tmp_path / "dask", root) == catalog(tmp_path / "embedded", root)


def scored_tree(root: Path, families: int = 3) -> None:
    """:func:`tree`, and what only the default mode reads again: small files.

    Two files under 1 KB alike (the collation's small pairs, scored at once),
    and 400-byte passages of a larger file that hold none of its fingerprints
    (the small-file pass finds them).
    """
    tree(root, families=families)
    small = text(11, 900)
    write(root / "small/a.txt", small)
    write(root / "small/b.txt", small[:700] + text(12, 150))
    big = text(7, 60_000)
    write(root / "held/big.txt", big)
    write(root / "held/whole.txt", big[17_500:17_900])
    write(root / "held/part.txt", big[47_500:47_750] + text(8, 250))


def test_the_default_mode_scores_on_the_workers_as_the_embedded_engine(
    tmp_path: Path, engine: DaskEngine
) -> None:
    from distributed import get_task_stream

    root = tmp_path / "t"
    scored_tree(root)
    opts = SimilarOptions(threshold=10)
    here = find_similar([root], tmp_path / "embedded", options=opts, jobs=2)
    with get_task_stream(client=engine.client) as stream:
        there = find_similar([root], tmp_path / "dask", options=opts, jobs=2, engine=engine)
    # The exact pass, the small-file table and its stream ran as tasks on the workers.
    ran = {str(t["key"]).split("-", 1)[0] for t in stream.data}
    assert {"_exact_chunk", "_table", "_stream_chunk"} <= ran
    assert described(there) == described(here)
    held = {frozenset(os.path.basename(x) for x in (p.a.path, p.b.path)) for p in here.pairs}
    assert {frozenset(("big.txt", "whole.txt")), frozenset(("a.txt", "b.txt"))} <= held
    assert all(p.exact_a_in_b is not None for p in here.pairs)
    assert here.stats.exact_pairs > 20 and here.stats.small_candidates >= 2
    for k in ("exact_pairs", "small_files", "small_candidates", "estimated", "pairs"):
        assert getattr(there.stats, k) == getattr(here.stats, k), k


# Workers in the process (threads): as nobody, this Python cannot exec itself again.
NOBODY_CLUSTER = r"""
import logging, sys
from distributed import LocalCluster
with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                  dashboard_address=":0",
                  local_directory=sys.argv[1], silence_logs=logging.ERROR) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()  # until the test closes it
"""
NOBODY = ("--reuid=nobody", "--regid=nogroup", "--clear-groups")


def test_a_file_the_workers_cannot_read_keeps_its_estimate_as_on_the_embedded_engine() -> None:
    """Workers that may not read a file the client indexed: the embedded engine's warning.

    The index is made by root (who reads everything); a file of the tree is
    root's alone. The embedded run is ``nobody``'s; the Dask run's client is
    root, its workers (a cluster started as ``nobody``) cannot open that file:
    the same warning, the same pairs, that file's kept as estimates.
    """
    assert os.geteuid() == 0, "this test needs root (CI runs as root): workers run as nobody"
    with tempfile.TemporaryDirectory() as top_dir:
        top = Path(top_dir)
        os.chmod(top, 0o755)
        root = top / "t"
        scored_tree(root, families=2)
        secret = root / "fam1/v2.txt"
        os.chmod(secret, 0o600)  # before indexing: a chmod is a change (its ctime)
        build_index([root], top / "idx", jobs=1)
        shutil.copytree(top / "idx", top / "idx2")
        for dirpath, _, names in os.walk(top / "idx"):  # nobody writes this one
            for p in [dirpath, *(os.path.join(dirpath, n) for n in names)]:
                os.chown(p, 65534, 65534)
        scratch = top / "scratch"
        scratch.mkdir()
        os.chown(scratch, 65534, 65534)
        cluster = subprocess.Popen(
            [tool("setpriv"), *NOBODY, sys.executable, "-c", NOBODY_CLUSTER, str(scratch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=top,
        )
        try:
            assert cluster.stdout is not None
            address = cluster.stdout.readline().strip()
            assert address.startswith("tcp://"), address
            args = ("similar", "-j", "2", "-t", "10", "--format", "json", str(root))
            here = sif_as(*args, "--index", str(top / "idx"), nobody=True, cwd=top, timeout=120)
            there = sif(
                *args, "--index", str(top / "idx2"), "--engine", "dask", "--scheduler", address
            )
        finally:
            assert cluster.stdin is not None
            cluster.stdin.close()
            cluster.wait(timeout=60)
    assert here.returncode == there.returncode == 1, (here.stderr, there.stderr)

    def warned(run: subprocess.CompletedProcess[str]) -> list[str]:
        return sorted({x for x in run.stderr.splitlines() if x.startswith("sif: warning:")})

    assert warned(there) == warned(here) == [f"sif: warning: {secret}: Permission denied"]
    records = [json.loads(x) for x in there.stdout.splitlines()]
    assert records == [json.loads(x) for x in here.stdout.splitlines()]
    estimated = [r for r in records if str(secret) in (r["a"], r["b"])]
    assert estimated and all(not r["score_exact"] and r["score_low"] is not None for r in estimated)
    assert sum(r["score_exact"] for r in records) > 10


class RemoveOnRead(NullProgress):
    """Removes a file once the walk has listed it: the workers cannot read it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        if name == "fingerprinting" and self.path.exists():
            self.path.unlink()


def test_a_path_a_worker_cannot_read_is_the_same_per_file_warning(
    tmp_path: Path, engine: DaskEngine
) -> None:
    warned: dict[str, list[ScanWarning]] = {"embedded": [], "dask": []}
    for name, eng in (("embedded", None), ("dask", engine)):
        root = tmp_path / name / "t"
        tree(root, families=2)
        gone = root / "fam1/v2.txt"
        stats = build_index(
            [root],
            tmp_path / name / "idx",
            jobs=1,
            engine=eng,
            on_warning=warned[name].append,
            progress=RemoveOnRead(gone),
        )
        assert stats.failed == 1
        assert [w.path for w in warned[name]] == [str(gone)]
        # The files read are counted as files, not entries (the zip gives two).
        every = sorted(str(p) for p in root.rglob("*") if p.is_file())
        assert stats.files_read == len(every) and sorted(stats.read_paths) == every
        assert stats.bytes_read == sum(os.path.getsize(p) for p in every)
    assert [w.cause for w in warned["dask"]] == [w.cause for w in warned["embedded"]]


class KillAWorker(NullProgress):
    """Kills (SIGKILL) a worker process while it reads files.

    Once ``after`` files were read, a thread waits until the scheduler says a
    worker is processing reads (the big file takes a while), then kills it.
    """

    def __init__(self, engine: DaskEngine, after: int = 0) -> None:
        self.engine = engine
        self.after = after
        self.read = 0
        self.killed: int | None = None
        self.thread: threading.Thread | None = None

    def advance(self, amount: int = 1) -> None:
        self.read += 1

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        if name == "fingerprinting" and self.thread is None:
            self.read = 0  # the walk advanced too
            self.thread = threading.Thread(target=self._kill, daemon=True)
            self.thread.start()

    def _reading(self) -> list[str]:
        """The workers that the scheduler sees processing reads."""
        return [
            w
            for w, keys in self.engine.client.processing().items()
            if any(str(k).startswith("scan_part") for k in keys)
        ]

    def _kill(self) -> None:
        client = self.engine.client
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            busy = self._reading() if self.read >= self.after else []
            if not busy:
                time.sleep(0.002)
                continue
            pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
            os.kill(pid, signal.SIGSTOP)  # it cannot finish its task now
            if busy[0] in self._reading():  # still at it: each such task fails once
                os.kill(pid, signal.SIGKILL)
                self.killed = pid
                return
            os.kill(pid, signal.SIGCONT)


def big_tree(root: Path) -> None:
    """:func:`tree`, and a 12 MB file: a task that runs for a while."""
    tree(root, families=8)
    write(root / "z-big/big.txt", text(77, 200_000) * 60)


def test_a_worker_killed_mid_run_is_retried_and_the_catalog_is_the_same(
    tmp_path: Path, engine: DaskEngine
) -> None:
    root = tmp_path / "t"
    big_tree(root)
    build_index([root], tmp_path / "embedded", jobs=1)
    killer = KillAWorker(engine)
    build_index([root], tmp_path / "dask", jobs=1, engine=engine, progress=killer)
    assert killer.killed is not None
    assert catalog(tmp_path / "dask", root) == catalog(tmp_path / "embedded", root)
    engine.client.wait_for_workers(2, timeout=60)  # the nanny restarted it


def test_a_task_that_kills_its_worker_too_often_is_one_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "t"
    big_tree(root)
    for i in range(3):  # more long tasks: the killer, polling the scheduler, sees one
        write(root / f"z-big{i}/big.txt", text(80 + i, 200_000) * 60)
    with DaskEngine(workers=1, memory_limit="1GB", timeout=60, allowed_failures=0) as eng:
        assert eng.workers() == 1  # started here, not in the killer's thread
        killer = KillAWorker(eng)
        with pytest.raises(WorkerDied, match="died each time it ran the same task"):
            build_index(
                [root], tmp_path / "idx", jobs=1, engine=eng, progress=killer, checkpoint_bytes=1
            )
    # The index is as at its last checkpoint: usable, and the next run completes it.
    stats = build_index([root], tmp_path / "idx", jobs=1)
    assert stats.new + stats.unchanged == 40
    build_index([root], tmp_path / "embedded", jobs=1)
    assert catalog(tmp_path / "idx", root) == catalog(tmp_path / "embedded", root)


def test_a_cluster_without_workers_ends_with_one_line_not_a_hang(tmp_path: Path) -> None:
    from distributed import LocalCluster

    write(tmp_path / "t/a.txt", text(1, 3000))
    with LocalCluster(n_workers=0, dashboard_address=":0", processes=False) as cluster:
        eng = DaskEngine(scheduler=cluster.scheduler_address, timeout=2)
        try:
            with pytest.raises(WorkerDied, match="no worker"):
                build_index([tmp_path / "t"], tmp_path / "idx", jobs=1, engine=eng)
        finally:
            eng.close()


def sif(*args: str, code: str = "", **kw: Any) -> subprocess.CompletedProcess[str]:
    """``python -m sif ARGS`` after ``code`` (run in the child first)."""
    prog = (
        f"{code}\nimport sys\nsys.argv = ['sif', *{list(args)!r}]\nfrom sif.cli import run\nrun()"
    )
    return subprocess.run(
        [sys.executable, "-c", prog], capture_output=True, text=True, timeout=120, **kw
    )


BLOCK_DASK = "import sys\nsys.modules['dask'] = None\nsys.modules['distributed'] = None"


@pytest.mark.parametrize("command", ["index", "similar"])
def test_engine_dask_without_the_extra_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    write(tmp_path / "t/a.txt", text(1, 3000))
    idx = tmp_path / "idx"
    done = sif(
        command, "--engine", "dask", "--index", str(idx), str(tmp_path / "t"), code=BLOCK_DASK
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "pip install 'sif[dask]'" in done.stderr
    assert not idx.exists()  # before any work


def test_the_embedded_engine_never_imports_dask(tmp_path: Path) -> None:
    write(tmp_path / "t/a.txt", text(1, 3000))
    write(tmp_path / "t/b.txt", text(1, 3000) + text(2, 500))
    check = "import atexit, sys\natexit.register(lambda: print('dask' in sys.modules))"
    for command in ("index", "similar"):
        done = sif(command, "-q", "--index", str(tmp_path / "idx"), str(tmp_path / "t"), code=check)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "False"


def test_the_cli_runs_similar_on_a_local_cluster_and_refuses_dask_options_without_it(
    tmp_path: Path,
) -> None:
    import json

    tree(tmp_path / "t", families=2)
    args = ("similar", "-q", "-j", "1", "-t", "10", "--format", "json", str(tmp_path / "t"))
    here = sif(*args, "--index", str(tmp_path / "e"))
    there = sif(*args, "--index", str(tmp_path / "d"), "--engine", "dask", "--workers", "1")
    assert here.returncode == there.returncode == 0, there.stderr
    assert [json.loads(line) for line in there.stdout.splitlines()] == [
        json.loads(line) for line in here.stdout.splitlines()
    ]
    assert len(here.stdout.splitlines()) > 5
    wrong = sif("index", "--workers", "2", "--index", str(tmp_path / "x"), str(tmp_path / "t"))
    assert wrong.returncode == 2 and "--engine dask" in wrong.stderr
    assert not (tmp_path / "x").exists()


def test_a_parts_reads_count_by_their_bytes_in_a_workers_memory(tmp_path: Path) -> None:
    from dask.sizeof import sizeof

    from sif.content import ContentOptions
    from sif.executors.dask import scan_part

    tree(tmp_path / "t", families=2)
    items = []
    for p in sorted((tmp_path / "t").rglob("*")):
        if p.is_file():
            s = p.stat()
            items.append((str(p), s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns))
    batch = scan_part((DEFAULT_PARAMS, None, ContentOptions()), False, items)
    fps = batch.entries.fingerprints().nbytes
    names = sum(len(i[0]) for i in items)
    assert len(batch.paths) == len(items) and fps > 1000
    assert fps + names + 100 * len(items) <= sizeof(batch) <= fps + 3 * names + 1000 * len(items)
