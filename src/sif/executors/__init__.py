"""Where per-file work runs: this process and its forked workers (Dask comes later)."""

from sif.executors.local import fork_pool, shared_map

__all__ = ["fork_pool", "shared_map"]
