"""Two trees by content (``sif compare A B``) and similar directories in one tree.

- :func:`compare_trees`: every file of A and B accounted for in four passes
  (:mod:`sif.compare.passes`), then the directory roll-up
  (:mod:`sif.compare.rollup`);
- :func:`similar_directories` and :func:`identical_directories`: pairs of
  directories whose contents are largely the same, and groups of
  directories whose whole content is identical (:mod:`sif.compare.dirs`).
"""

from __future__ import annotations

from sif.compare.model import (
    CONTAINED,
    PASS_NAMES,
    PASS_OF,
    STATUSES,
    CompareResult,
    CompareStats,
    DirectoryShare,
    FileComparison,
)
from sif.compare.passes import compare_trees

__all__ = [
    "CONTAINED",
    "PASS_NAMES",
    "PASS_OF",
    "STATUSES",
    "CompareResult",
    "CompareStats",
    "DirectoryShare",
    "FileComparison",
    "compare_trees",
]
