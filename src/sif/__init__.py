"""sif: exact replicas, similar files and fuzzy checksums in large file systems."""

from __future__ import annotations

from sif.core.fuzzysum import checksum, checksum_v2, compare_v2

__version__ = "0.1.0"

__all__ = ["__version__", "checksum", "checksum_v2", "compare_v2"]
