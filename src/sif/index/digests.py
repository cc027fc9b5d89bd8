"""What the catalog knows of whole files: their identity and content digest.

For a caller that would otherwise hash a file to compare it (``sif
compare``): a file whose identity (device, inode, size, mtime and ctime)
is the one indexed, and whose indexed entry is the whole file in the raw
view, has the indexed BLAKE3 digest of its bytes. One exception: a
compressed file is indexed by its decompressed content, also in the raw
view, so the caller must rule out a compressed stream (its first bytes:
:func:`sif.filetypes.sniff`) before trusting the digest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sif.errors import IndexUnusable
from sif.fingerprint import FingerprintParams
from sif.index.store import ParamSet, param_set


@dataclass(frozen=True)
class IndexedWhole:
    """An indexed whole file: its identity when indexed, its content's size and digest."""

    dev: int
    ino: int
    file_size: int
    mtime_ns: int
    ctime_ns: int
    size: int
    digest: bytes


def whole_files(
    location: str | os.PathLike[str], params: FingerprintParams | ParamSet
) -> dict[str, IndexedWhole]:
    """The whole files in the raw view indexed under ``params``, by path (``{}`` if none).

    Opens the catalog read-only, under a shared lock; an index that is
    missing, in use by a writer or of another schema gives ``{}`` (the
    caller hashes instead). Cost: one scan of ``files``.
    """
    from sif.index.duck import CATALOG, UNKNOWN_CTIME, DuckStore

    if not os.path.exists(os.path.join(os.fspath(location), CATALOG)):
        return {}
    try:
        store = DuckStore(os.fspath(location), read_only=True)
    except IndexUnusable:
        return {}
    try:
        pid = store._find_params(param_set(params))
        if pid is None:
            return {}
        cols = (
            store.catalog()
            .execute(
                "SELECT path, dev, ino, file_size, mtime_ns, "
                f"coalesce(ctime_ns, {UNKNOWN_CTIME}) AS ctime_ns, size, digest FROM files "
                "WHERE params_id = ? AND coalesce(origin, path) = path "
                "AND coalesce(CAST(view AS VARCHAR), 'raw') = 'raw'",
                [int(pid)],
            )
            .fetchall()
        )
    finally:
        store.close()
    return {
        os.fsdecode(bytes(path)): IndexedWhole(
            int(dev), int(ino), int(fsize), int(mt), int(ct), int(size), bytes(digest)
        )
        for path, dev, ino, fsize, mt, ct, size, digest in cols
    }
