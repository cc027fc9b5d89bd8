"""The Dask engine: the embedded engine's per-file function and collation, on a cluster.

``pip install 'sif[dask]'``; ``--engine dask`` with ``--scheduler ADDRESS``
(a running cluster: dask-jobqueue on SLURM, dask-kubernetes, ``dask
scheduler``) or, without it, a ``LocalCluster`` of ``workers`` processes of
``memory_limit`` each. Dask only partitions, ships and retries; the work is
the embedded engine's:

- **Index.** This process walks and plans (:func:`sif.index.build.build_index`),
  cuts the files to read into parts of about equal bytes
  (:func:`byte_parts`), and each worker runs the same
  :func:`sif.index.scanjobs._scan_batch` on a part, with the parameters, the
  anchor set and the content options passed to it (scattered once), not
  inherited. Reads come back as compact columns (the fingerprints of each
  entry); this process stays the one writer of the index, committing at its
  checkpoints as the embedded engine does. Workers must see the same paths
  (a shared or replicated file system); a path a worker cannot read is the
  same per-file warning as in the embedded engine.
- **Similar.** The rows in scope are cut into hash partitions by bucket range
  (the top 16 bits of the fingerprint: every row of a fingerprint in one
  partition, so its document frequency and the ``max_df`` cap are exact
  there); each worker reads its ranges from the index's segments itself (the
  index directory on the shared file system: the segments are immutable) and
  runs the same :data:`sif.similar.collate.COLLATE_SQL` in DuckDB
  (:func:`sif.similar.collate.collate_group`: a task's partitions one after
  the other, their pairs summed as they come). Its partial pair counts are
  split by a hash of the pair, and a second round of tasks sums each split
  over all tasks (a shuffle on the pair key); only the summed pairs come
  back.
- **Exact scores** (``sif similar``'s default, and the small-file pass):
  the same chunks of pairs as on the embedded engine's processes, each a
  task running the same function on a worker (:meth:`DaskEngine.map_exact`),
  which reads the files; a file it cannot read is the same per-file warning,
  and its pairs keep their estimate. This process only gathers the scores.

Failure: Dask retries the tasks of a worker that died
(``distributed.scheduler.allowed-failures``, 3 by default); a task that kills
its workers that often, or a cluster that finishes no task for ``timeout``
seconds, ends the run with one :class:`sif.errors.WorkerDied` line, and the
index is as at its last checkpoint. Nothing here imports dask before an
engine is made, so the embedded engine never loads it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence, Sized
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError, EngineUnavailable, WorkerDied
from sif.executors.engine import Item
from sif.index.pairstore import RowSource, bucket_ranges

EXTRA = "pip install 'sif[dask]'"
#: Seconds without any task finishing before a run is declared stuck (no workers,
#: a scheduler gone): the run ends with one line instead of hanging.
DEFAULT_TIMEOUT = 900.0
#: Seconds to reach a scheduler given by address.
CONNECT_TIMEOUT = 30.0
#: Parts of the files to read per worker (a part of ``bytes / (workers * this)``)...
PARTS_PER_WORKER = 4
#: ... of at most this many bytes, and at most this many files.
PART_BYTES = 256 << 20
PART_FILES = 4096
#: Share of a worker's memory limit that DuckDB may use for a collation.
DUCKDB_SHARE = 0.5
#: Tasks of the collation per worker (each a group of consecutive hash partitions of
#: about :data:`sif.similar.collate.PARTITION_ROWS` rows, summed as they come), for
#: balance; and as many splits of the pair key for the sums.
COLLATE_PARTS_PER_WORKER = 2
#: Bytes of a worker's memory limit per fingerprint row of a hash partition: a
#: partition of 16.7 M synthetic rows peaked at 1.36 GB collating (DuckDB's 1 GB
#: included); a worker also holds its tasks' summed pairs (11.7 M pairs, 234 MB, on
#: 200 M synthetic rows) and their merges. With 2 GB, partitions of 4 M rows (never
#: more than the embedded engine's); at 8 M a worker went over 1.9 GB, and died.
WORKER_BYTES_PER_ROW = 512
#: Rows of a collation task at least (about 2 CPU seconds), unless ``partitions``
#: asks for more: a small scope is one task, not two a worker (each task, split and
#: sum is a round trip: 28 of them made the collation of 345 k Linux rows 3x slower).
MIN_TASK_ROWS = 1 << 21

Pairs = dict[str, npt.NDArray[Any]]
T = TypeVar("T")
R = TypeVar("R")


def require_dask() -> None:
    """Raise :class:`EngineUnavailable` (naming the extra) unless dask can be imported."""
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailable(
            f"--engine dask needs the Dask extra: {EXTRA} ({exc.msg or exc})"
        ) from None


def parse_size(text: str) -> int:
    """Bytes of a size such as ``2GB`` or ``500MiB``; :class:`ConfigError` otherwise."""
    from dask.utils import parse_bytes

    try:
        n = int(parse_bytes(text))
    except (ValueError, TypeError):
        n = 0
    if n <= 0:
        raise ConfigError(f"--memory-limit must be a size such as 500MB or 2GB, not {text!r}")
    return n


def byte_parts(todo: Sequence[Item], parts: int) -> list[list[Item]]:
    """``todo`` cut, in its order, into parts of about equal bytes (not equal counts).

    About ``parts`` parts, each of at most :data:`PART_BYTES` (a larger file
    is a part of its own) and :data:`PART_FILES` files.
    """
    total = sum(t[3] for t in todo)
    target = max(1, min(PART_BYTES, -(-total // max(1, parts))))
    out: list[list[Item]] = []
    part: list[Item] = []
    size = 0
    for item in todo:
        if part and (size + item[3] > target or len(part) >= PART_FILES):
            out.append(part)
            part, size = [], 0
        part.append(item)
        size += item[3]
    if part:
        out.append(part)
    return out


# --- the functions the workers run ------------------------------------------------


def scan_part(context: tuple[Any, Any, Any], bulk: bool, part: list[Item]) -> Any:
    """:func:`sif.index.scanjobs._scan_batch` of ``part`` on a worker.

    ``context``: (fingerprint parameters, anchor set, content options), given
    explicitly (a worker inherits nothing from the client).
    """
    from sif.index import scanjobs

    _count_batches()
    scanjobs.set_run(*context)
    return scanjobs._scan_batch((bulk, part))


@functools.cache
def _count_batches() -> None:
    """A part's results (:class:`sif.index.scanjobs.ReadBatch`) counted by their bytes in a
    worker's memory (``dask.sizeof``: else a few hundred bytes whatever their fingerprints,
    and ``--memory-limit`` would not see them)."""
    from dask.sizeof import sizeof

    from sif.index.scanjobs import ReadBatch

    sizeof.register(ReadBatch)(ReadBatch.nbytes)


def warm_worker(params: Any) -> None:
    """:func:`sif.index.scanjobs._warm` on a worker: numba's kernels loaded for its reads."""
    from sif.index import scanjobs

    scanjobs._PARAMS = params
    scanjobs._warm()


def _pair_split(cols: Pairs, splits: int) -> list[Pairs]:
    """``cols`` cut into ``splits`` by a hash of the pair (a, b): the shuffle's key."""
    if splits == 1:
        return [cols]
    key = (cols["a"].astype(np.uint64) << np.uint64(32)) | cols["b"].astype(np.uint64)
    # A multiplicative hash of the key (the pairs of one file spread over all splits).
    h = (key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    which = (h % np.uint64(splits)).astype(np.int64)
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(splits + 1))
    return [
        {k: v[order[bounds[s] : bounds[s + 1]]] for k, v in cols.items()} for s in range(splits)
    ]


def collate_part(
    source: RowSource,
    ranges: list[tuple[int, int]],
    max_df: int,
    threads: int,
    memory_limit: str,
    splits: int,
) -> tuple[list[Pairs], int, int]:
    """:func:`sif.similar.collate.collate_group` of the bucket ranges ``ranges`` on a worker.

    Returns the partial pairs (summed over the ranges as they come) cut into
    ``splits`` (:func:`_pair_split`), the stop-fingerprints and the rows read.
    """
    from sif.similar.collate import collate_group, collation_connection

    tmp = None
    try:
        from distributed import get_worker

        tmp = os.path.join(get_worker().local_directory, "sif-duckdb")
    except (ImportError, ValueError):
        pass
    con = collation_connection(memory_limit, tmp, threads)
    try:
        cols, stopped, n = collate_group(con, source.rows, ranges, max_df, threads, memory_limit)
    finally:
        con.close()
        close = getattr(source, "close", None)
        if close is not None:
            close()
    cut = _pair_split(cols, splits)
    del cols
    return cut, stopped, n


def _identity(value: Any) -> Any:
    return value


def _split_of(result: tuple[list[Pairs], int, int], s: int) -> Pairs:
    return result[0][s]


def _counts_of(result: tuple[list[Pairs], int, int]) -> tuple[int, int]:
    return result[1], result[2]


def sum_split(*parts: Pairs) -> Pairs:
    """The pairs of one split of the pair key, their partial counts summed."""
    from sif.similar.collate import merge_pairs

    return merge_pairs([p for p in parts if len(p["a"])])


# --- the engine ---------------------------------------------------------------------


class DaskEngine:
    """Run ``sif index`` and ``sif similar`` on a Dask cluster (see the module docstring).

    ``scheduler``: the address of a running scheduler; else a ``LocalCluster``
    of ``workers`` processes (default: the cores) of one thread and
    ``memory_limit`` each (default: the machine's memory shared out). The
    cluster is started, or reached, at the first work; ``close`` ends what was
    started. Raises :class:`EngineUnavailable` when dask is not installed.
    """

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        memory_limit: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        allowed_failures: int | None = None,
    ) -> None:
        require_dask()
        if workers is not None and workers < 1:
            raise ConfigError("--workers must be at least 1")
        if scheduler is not None and workers is not None:
            raise ConfigError("--workers sizes a local cluster: it goes without --scheduler")
        self.memory_bytes = parse_size(memory_limit) if memory_limit is not None else None
        self.scheduler = scheduler
        self.n_workers = workers
        self.timeout = timeout
        self.allowed_failures = allowed_failures
        self._cluster: Any = None
        self._client: Any = None
        self._warming: list[Any] = []

    # --- the cluster ------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Dask client, connecting (or starting the local cluster) at first use."""
        if self._client is None:
            self._start()
        return self._client

    def _start(self) -> None:
        import dask
        from distributed import Client, LocalCluster

        settings: dict[str, Any] = {"distributed.worker.daemon": False}
        if self.allowed_failures is not None:
            settings["distributed.scheduler.allowed-failures"] = self.allowed_failures
        with dask.config.set(settings):
            if self.scheduler is not None:
                try:
                    self._client = Client(
                        self.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False
                    )
                except (OSError, TimeoutError) as exc:
                    raise EngineUnavailable(
                        f"cannot reach the Dask scheduler at {self.scheduler}: {exc}"
                    ) from None
                return
            n = self.n_workers or os.cpu_count() or 1
            self._cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                memory_limit=self.memory_bytes if self.memory_bytes is not None else "auto",
                dashboard_address=":0",  # a free port: other clusters may run here
                silence_logs=logging.ERROR,
            )
            self._client = Client(self._cluster, set_as_default=False)

    def warm(self, params: Any) -> None:
        """Load the fingerprint kernels on each worker now, without waiting (a new index).

        As the embedded engine's workers do while this process opens the index
        and walks; the tasks are held until the next :meth:`scan` ends.
        """
        self.workers()
        client = self.client
        self._warming = [
            client.submit(warm_worker, params, workers=[w], pure=False)
            for w in client.scheduler_info()["workers"]
        ]

    def workers(self) -> int:
        """The workers the scheduler knows now (waits a little for the first)."""
        client = self.client
        try:
            client.wait_for_workers(1, timeout=self.timeout)
        except (TimeoutError, OSError):
            raise WorkerDied(
                f"the Dask cluster has no worker after {self.timeout:.0f} s: stopped"
            ) from None
        return max(1, len(client.scheduler_info()["workers"]))

    def _worker_memory(self) -> int:
        """A worker's memory limit: the one given, else the least the cluster reports."""
        if self.memory_bytes is not None:
            return self.memory_bytes
        limits = [
            int(w.get("memory_limit") or 0)
            for w in self.client.scheduler_info()["workers"].values()
        ]
        limits = [m for m in limits if m > 0]
        return min(limits) if limits else 2 << 30

    def close(self) -> None:
        """Disconnect, and end the local cluster if this engine started it."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        self._warming = []
        if client is not None:
            client.close(timeout=10)
        if cluster is not None:
            cluster.close(timeout=10)

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- waiting, with a bound --------------------------------------------------------

    def _some_done(self, pending: Collection[Any]) -> set[Any]:
        """The futures of ``pending`` that are done, once at least one is.

        Raises :class:`WorkerDied` for a task that killed its workers more
        often than the scheduler allows, or when none finishes in ``timeout``
        seconds; a task's own error (:class:`sif.errors.OutOfMemory`) is
        raised by its ``result()``.
        """
        from distributed import KilledWorker

        try:
            done, _ = self.client.sync(_wait_first, list(pending), timeout=self.timeout)
        except TimeoutError:
            raise WorkerDied(
                f"the Dask cluster finished no task in {self.timeout:.0f} s "
                "(no worker left?): stopped"
            ) from None
        for f in done:
            if f.status == "error" and isinstance(f.exception(), KilledWorker):
                raise WorkerDied(
                    "a Dask worker died each time it ran the same task (out of "
                    "memory? raise --memory-limit per worker): stopped"
                ) from None
        return set(done)

    def _completed(self, futures: Iterable[Any]) -> Iterator[Any]:
        """``futures`` as they finish, each checked by :meth:`_some_done`."""
        pending = set(futures)
        while pending:
            for f in self._some_done(pending):
                pending.discard(f)
                yield f

    # --- the work -----------------------------------------------------------------------

    def scan(
        self, todo: Sequence[Item], bulk: bool, params: Any, anchors: Any, content: Any
    ) -> Iterator[tuple[int, Any]]:
        """``(part, reads)`` of ``todo`` cut by bytes, read on the workers, in order.

        In the order of ``todo`` (the walk's), so that entries get the ids the
        embedded engine gives them on one process; at most two parts per worker
        are in flight, so the reads waiting for this process (the one writer)
        stay bounded.
        """
        if not todo:
            return
        n = self.workers()
        parts = byte_parts(todo, n * PARTS_PER_WORKER)
        client = self.client
        context = self._held((params, anchors, content))
        inflight: deque[Any] = deque()
        try:
            for i, part in enumerate(parts):
                inflight.append(client.submit(scan_part, context, bulk, part, pure=False))
                if len(inflight) >= 2 * n:
                    yield i - len(inflight) + 1, self._result(inflight.popleft())
            while inflight:
                yield len(parts) - len(inflight), self._result(inflight.popleft())
        finally:
            for f in inflight:
                f.cancel()
            context.release()
            self._warming = []

    def _held(self, value: Any) -> Any:
        """A future of ``value`` that the cluster can make again if its worker dies.

        A task that returns it (not a scatter: scattered data dies with its worker);
        each worker that needs it fetches it once.
        """
        return self.client.submit(_identity, value, pure=False)

    def _result(self, future: Any) -> Any:
        """The value of ``future`` once done (:meth:`_completed`), which is then released."""
        for f in self._completed([future]):
            value = f.result()
        future.release()
        return value

    def map_exact(
        self, func: Callable[..., R], items: Iterable[T], common: Any = None
    ) -> Iterator[tuple[int, R]]:
        """``(index, func(item))`` of ``items``, each a task on a worker, as they finish.

        The exact pass's and the small-file pass's chunks (see
        :meth:`sif.executors.engine.Engine.map_exact`): the files are read on
        the workers, this process gathers the scores and the warnings. At most
        two tasks a worker are in flight (the chunks wait here, not on the
        scheduler). ``common`` is held on the cluster once (:meth:`_held`:
        each worker fetches it once), then ``func(common, item)``.
        """
        if isinstance(items, Sized) and not len(items):
            return
        n = self.workers()
        client = self.client
        held = self._held(common) if common is not None else None
        args = () if held is None else (held,)
        todo = iter(enumerate(items))
        which: dict[Any, int] = {}
        try:
            while True:
                while len(which) < 2 * n:
                    nxt = next(todo, None)
                    if nxt is None:
                        break
                    which[client.submit(func, *args, nxt[1], pure=False)] = nxt[0]
                if not which:
                    return
                for f in self._some_done(which):
                    i = which.pop(f)
                    value = f.result()
                    f.release()
                    yield i, value
        finally:
            for f in which:
                f.cancel()
            if held is not None:
                held.release()

    def collate(
        self, source: RowSource, max_df: int, partitions: int, memory_limit: str
    ) -> tuple[Pairs, int, int]:
        """The collation of ``source`` on the workers: (pairs, stop-fingerprints, rows).

        ``memory_limit`` bounds DuckDB on each worker (at most
        :data:`DUCKDB_SHARE` of the worker's limit). Hash partitions: at least
        ``partitions``, :data:`COLLATE_PARTS_PER_WORKER` per worker, and
        :data:`sif.similar.collate.PARTITION_ROWS` rows each or fewer (one row
        per :data:`WORKER_BYTES_PER_ROW` of the worker's memory), in
        ``COLLATE_PARTS_PER_WORKER`` tasks a worker (groups of consecutive
        partitions: a task's partial pairs are summed over its partitions before
        they travel); their pairs are cut into as many splits of the pair key.
        Memory of a worker: DuckDB's limit and one partition's rows while it
        collates, plus the distinct pairs of its tasks.
        """
        from sif.similar.collate import PARTITION_ROWS, merge_pairs, partition_count

        n = self.workers()
        wanted = max(-(-source.total // MIN_TASK_ROWS), partitions, 1)
        tasks = min(COLLATE_PARTS_PER_WORKER * n, wanted)
        memory = self._worker_memory()
        per_part = min(PARTITION_ROWS, max(1 << 16, memory // WORKER_BYTES_PER_ROW))
        parts = max(partition_count(source.total, partitions), -(-source.total // per_part), tasks)
        duck = int(memory * DUCKDB_SHARE)
        if memory_limit:
            duck = min(duck, parse_size(memory_limit))
        duck_limit = f"{max(duck >> 20, 16)}MB"
        client = self.client
        src = self._held(source)
        ranges = bucket_ranges(parts)
        groups = [ranges[(g * parts) // tasks : ((g + 1) * parts) // tasks] for g in range(tasks)]
        splits = tasks
        collated = [
            client.submit(collate_part, src, group, max_df, 1, duck_limit, splits, pure=False)
            for group in groups
        ]
        sums = [
            client.submit(
                sum_split,
                *[client.submit(_split_of, c, s, pure=False) for c in collated],
                pure=False,
            )
            for s in range(splits)
        ]
        counts = [client.submit(_counts_of, c, pure=False) for c in collated]
        # Held only by the tasks that need them: a partition's partial pairs are freed
        # on its worker once both their splits and its counts are taken.
        del collated
        try:
            out: list[Pairs] = []
            stopped = rows = 0
            for f in self._completed([*sums, *counts]):
                value = f.result()
                if isinstance(value, tuple):
                    stopped += int(value[0])
                    rows += int(value[1])
                else:
                    out.append(value)
            return merge_pairs(out) if len(out) != 1 else out[0], stopped, rows
        finally:
            for f in [*sums, *counts]:
                f.cancel()
            src.release()


async def _wait_first(futures: list[Any], timeout: float) -> Any:
    """``distributed.wait(..., FIRST_COMPLETED)`` on the engine's own client (not the default)."""
    from distributed.client import _wait

    return await _wait(futures, timeout=timeout, return_when="FIRST_COMPLETED")
