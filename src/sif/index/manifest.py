"""Published states: the manifest readers open, and ``CURRENT`` that names it.

A manifest names the segments of each parameter set and the dead file ids
(see :mod:`sif.index.segments`); ``CURRENT`` names the manifest in force and
is replaced atomically, so a reader sees one committed state or the next.
Format 2 records each segment file's length and checksum
(:mod:`sif.index.checks`), the dead-id file's, the live entries of each set,
and a digest of the manifest's own text; format 1 (older indexes) is read too.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from sif.errors import IndexCorrupt
from sif.index.checks import Check, cause_of, corrupt, file_checksum
from sif.index.indexdir import temp_file
from sif.index.segments import U32, _fsync_dir, _save

#: Format of the manifests written; bump on an incompatible change. 2: lengths and
#: checksums of the segments' files, and a digest of the manifest itself.
SNAPSHOT_FORMAT = 2
#: Manifest formats read (1: no checks; its segments are checked for consistency only).
READ_FORMATS = (1, 2)


@dataclass(frozen=True)
class Manifest:
    """One published state: parameter sets, segments per set, and dead file ids.

    ``checks``: segment name -> :data:`Check` of its files (empty in a manifest
    of format 1, and for a segment an older writer made); ``dead_check``: the
    ``[bytes, checksum]`` of the dead-id file; ``files``: the live entries of
    each parameter set (what the catalog says; ``None`` in format 1).
    """

    generation: int
    params: dict[int, dict[str, Any]]  # id -> {"key": ..., "anchors": file name or None}
    segments: dict[int, list[str]]  # params id -> segment names
    dead: str | None  # file name of the sorted dead ids, under manifests/
    last_params: int | None
    checks: dict[str, Check] = field(default_factory=dict)
    dead_check: list[Any] | None = None
    files: dict[int, int] | None = None


_MANIFEST_NAME = re.compile(r"gen-(\d{8,})")


def _digest(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return xxhash.xxh3_128_hexdigest(json.dumps(body, sort_keys=True).encode())


def publish(root: str, manifest: Manifest, dead: U32) -> Manifest:
    """Make ``manifest`` the state readers see: write it, then swap ``CURRENT`` atomically.

    Returns it as published (with the dead-id file's name and check).
    """
    mdir = os.path.join(root, "manifests")
    os.makedirs(mdir, exist_ok=True)
    name = f"gen-{manifest.generation:08d}"
    dead_name = None
    dead_check = None
    if len(dead):
        dead_name = name + ".dead.npy"
        dead_path = os.path.join(mdir, dead_name)
        _save(dead_path, np.sort(dead).astype(np.uint32))
        dead_check = [os.path.getsize(dead_path), file_checksum(dead_path)]
    doc: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "generation": manifest.generation,
        "params": {str(k): v for k, v in manifest.params.items()},
        "segments": {str(k): v for k, v in manifest.segments.items()},
        "dead": dead_name,
        "last_params": manifest.last_params,
        "checks": manifest.checks,
        "dead_check": dead_check,
        "files": {str(k): v for k, v in (manifest.files or {}).items()},
    }
    doc["digest"] = _digest(doc)
    with open(os.path.join(mdir, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(mdir)
    fd, tmp = temp_file(root, "CURRENT.tmp")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(root, "CURRENT"))
    _fsync_dir(root)
    return Manifest(
        manifest.generation,
        manifest.params,
        manifest.segments,
        dead_name,
        manifest.last_params,
        manifest.checks,
        dead_check,
        manifest.files,
    )


def read_manifest(root: str) -> Manifest | None:
    """The manifest in force, or ``None`` for an index never published.

    Raises ``FileNotFoundError`` if the manifest vanished after ``CURRENT``
    was read (a writer moved on: read again) and :class:`IndexCorrupt` if it
    is unreadable, fails its digest, or if ``CURRENT`` is missing or damaged
    while the index has published before (a published state is only ever
    replaced, never removed).
    """
    current = os.path.join(root, "CURRENT")
    try:
        with open(current, encoding="ascii") as f:
            name = f.read().strip()
    except FileNotFoundError:
        if _published_before(root):
            raise corrupt(current, "missing, yet the index has published states") from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise corrupt(current, cause_of(exc)) from exc
    if not _MANIFEST_NAME.fullmatch(name):
        raise corrupt(current, f"names no manifest ({name[:40]!r})")
    path = os.path.join(root, "manifests", name + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        if doc.get("format") not in READ_FORMATS:
            raise corrupt(path, f"snapshot format {doc.get('format')} is not supported")
        if doc["format"] >= 2 and doc.get("digest") != _digest(doc):
            raise corrupt(path, "digest mismatch: the manifest was changed after it was written")
        files = doc.get("files")
        return Manifest(
            generation=int(doc["generation"]),
            params={int(k): dict(v) for k, v in doc["params"].items()},
            segments={int(k): [str(n) for n in v] for k, v in doc["segments"].items()},
            dead=doc["dead"],
            last_params=doc["last_params"],
            checks={str(k): dict(v) for k, v in doc.get("checks", {}).items()},
            dead_check=doc.get("dead_check"),
            files=None if files is None else {int(k): int(v) for k, v in files.items()},
        )
    except FileNotFoundError:
        raise
    except IndexCorrupt:
        raise
    except Exception as exc:  # JSON of any shape
        raise corrupt(path, f"unreadable index manifest: {cause_of(exc)}") from exc


def _published_before(root: str) -> bool:
    """Whether a state after the first (generation 0, an empty index) was published."""
    try:
        names = os.listdir(os.path.join(root, "manifests"))
    except OSError:
        return False
    for n in names:
        m = _MANIFEST_NAME.match(n)
        if m and int(m.group(1)) > 0:
            return True
    return False


def dead_sound(root: str, published: Manifest) -> bool:
    """Whether the published dead-id file still has its recorded checksum."""
    if not published.dead or published.dead_check is None:
        return True
    try:
        return (
            file_checksum(os.path.join(root, "manifests", published.dead))
            == (published.dead_check[1])
        )
    except OSError:
        return False


def same_state(published: Manifest, recorded: tuple[Manifest, Any, Any]) -> bool:
    """Whether the manifest in force is the one the catalog records (dead ids by count)."""
    want, dead, _ = recorded
    return (
        published.generation == want.generation
        and published.params == want.params
        and published.segments == want.segments
        and published.last_params == want.last_params
        and published.checks == want.checks
        and published.files == want.files
        and (published.dead is None) == (len(dead) == 0)
    )
