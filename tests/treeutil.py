"""Shared helpers for tests: real files in temporary trees."""

from __future__ import annotations

import os
from pathlib import Path


def write(path: Path | bytes, data: bytes) -> None:
    """Create ``path`` (a ``Path``, or raw bytes for names that are not UTF-8) with ``data``."""
    raw = os.fsencode(path)
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    with open(raw, "wb") as f:
        f.write(data)
