"""Where per-file work runs: this process and its forked workers (Dask comes later)."""

from sif.executors.local import Task, WorkerPool, fork_pool, shared_map

__all__ = ["Task", "WorkerPool", "fork_pool", "shared_map"]
