"""sif: exact replicas, similar files and fuzzy checksums in large file systems."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
