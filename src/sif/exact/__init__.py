"""Exact replica groups: size, then block rounds, byte-exact (seed 3)."""

from sif.exact.pipeline import (
    DupesStats,
    Group,
    Replica,
    ReplicaFinder,
    block_schedule,
    find_duplicates,
)

__all__ = ["DupesStats", "Group", "Replica", "ReplicaFinder", "block_schedule", "find_duplicates"]
