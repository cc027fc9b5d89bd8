"""sif: exact replicas, similar files and fuzzy checksums in large file systems.

The public names are imported on first use, so that ``sif dupes`` does not
pay for numpy at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "find_duplicates": "sif.exact",
    "Group": "sif.exact",
    "Replica": "sif.exact",
    "DupesStats": "sif.exact",
    "FileRecord": "sif.walk",
    "WalkOptions": "sif.walk",
    "ScanWarning": "sif.events",
    "SifError": "sif.errors",
    "checksum": "sif.core.fuzzysum",
    "checksum_v2": "sif.core.fuzzysum",
    "compare_v2": "sif.core.fuzzysum",
    "fingerprint": "sif.fingerprint",
    "fingerprint_file": "sif.fingerprint",
}

__all__ = [
    "DupesStats",
    "FileRecord",
    "Group",
    "Replica",
    "ScanWarning",
    "SifError",
    "WalkOptions",
    "__version__",
    "checksum",
    "checksum_v2",
    "compare_v2",
    "find_duplicates",
    "fingerprint",
    "fingerprint_file",
]

if TYPE_CHECKING:
    from sif.core.fuzzysum import checksum, checksum_v2, compare_v2
    from sif.errors import SifError
    from sif.events import ScanWarning
    from sif.exact import DupesStats, Group, Replica, find_duplicates
    from sif.fingerprint import fingerprint, fingerprint_file
    from sif.walk import FileRecord, WalkOptions


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sif' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
