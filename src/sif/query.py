"""One-against-all (Manber, section 3): the indexed files similar to a query file.

For a query Q with fingerprint multiset F(Q) and an indexed file B:

- ``percent``, the paper's figure: the rows of B whose value is in F(Q), as a
  percentage of |F(Q)|. Counted with multiplicity, so it can exceed 100%
  (the paper's footnote 3: a file holding two versions of the query);
- ``query_in_file``: set containment |F(Q) ∩ F(B)| / |F(Q)| (distinct values);
- ``file_in_query``: |F(Q) ∩ F(B)| / |F(B)|;
- ``exact``: same size and same BLAKE3 digest of the whole content.

The threshold applies to ``percent`` by default (the paper's query), or
with ``by="containment"`` to max(query_in_file, file_in_query), the estimate
of how much of the smaller file the larger holds, which DESIGN uses for
``sif similar``. Stored values have 32 bits: at 20 M rows a query value
meets a random row with probability 20e6 / 2^32 = 0.5%, spread over random
files, so chance hits add a fraction of a percent to no file in particular;
``min_shared`` (default 2 in containment mode) keeps a single chance hit
from making a one-fingerprint file look contained.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from sif.core.anchors import AnchorSet
from sif.errors import ConfigError, IndexParamsMismatch
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fingerprint import FingerprintParams
from sif.index.scan import U32, ScannedFile, scan_file
from sif.index.store import IndexReader

SCORES = ("percent", "containment")


@dataclass(frozen=True)
class Match:
    """An indexed file similar to a query file. Shares are fractions in [0, 1]."""

    path: str
    size: int
    kind: str
    percent: float
    hits: int
    shared: int
    query_in_file: float
    file_in_query: float
    exact: bool

    def score(self, by: str) -> float:
        """The figure the threshold applies to, in percent."""
        if by == "percent":
            return self.percent
        return 100.0 * max(self.query_in_file, self.file_in_query)


@dataclass(frozen=True)
class QueryResult:
    """A query file and its matches, best first."""

    path: str
    size: int
    kind: str
    digest: bytes
    n_fp: int
    matches: tuple[Match, ...]


def resolve_params(
    reader: IndexReader, params: FingerprintParams | None, where: str = "the index"
) -> tuple[FingerprintParams, AnchorSet | None]:
    """The parameters to query with: ``params``, or those of the last ``sif index`` run.

    Raises :class:`IndexParamsMismatch` when the index holds no fingerprints
    made with ``params`` (it never compares values made under other ones).
    """
    sets = reader.parameter_sets()
    if not sets:
        raise IndexParamsMismatch(f"{where} holds no fingerprints yet")
    if params is None:
        params = sets[0]
    elif params not in sets:
        held = "; ".join(p.key() for p in sets)
        raise IndexParamsMismatch(
            f"{where} holds no fingerprints made with {params.key()} (it holds: {held}); "
            "run 'sif index' with these parameters first, or drop them to use the index's"
        )
    return params, reader.anchors(params)


def match_scan(
    reader: IndexReader,
    params: FingerprintParams,
    scan: ScannedFile,
    *,
    threshold: float = 50.0,
    by: str = "percent",
    min_shared: int | None = None,
    exclude: tuple[int, int] | None = None,
) -> list[Match]:
    """Score every indexed file that shares a value with ``scan``; keep those at ``threshold``.

    ``exclude`` is the (device, inode) of the query file, left out of the
    results when it is indexed. Sorted by score, best first, then path.
    Cost: one lookup of the distinct query values, then O(hits).
    """
    if by not in SCORES:
        raise ConfigError(f"unknown score {by!r} (choose from {', '.join(SCORES)})")
    if min_shared is None:
        min_shared = 2 if by == "containment" else 1
    values = np.asarray(scan.fingerprints, dtype=np.uint32)
    n = len(values)
    if n == 0:
        return []
    query: U32 = np.unique(values)
    qpos, ids = reader.lookup(params, query)
    if len(ids) == 0:
        return []
    file_ids, hits = np.unique(ids, return_counts=True)
    pairs = np.unique((ids.astype(np.uint64) << np.uint64(32)) | qpos.astype(np.uint64))
    shared = np.bincount(
        np.searchsorted(file_ids, (pairs >> np.uint64(32)).astype(np.uint32)),
        minlength=len(file_ids),
    )
    percent = 100.0 * hits / n
    keep = shared >= min_shared
    if by == "percent":  # decided without describing every file
        keep &= percent >= threshold
    info = reader.describe(params, file_ids[keep])
    out: list[Match] = []
    for i in np.flatnonzero(keep):
        f = info.get(int(file_ids[i]))
        if f is None or (exclude is not None and (f.dev, f.ino) == exclude):
            continue
        m = Match(
            path=f.path,
            size=f.size,
            kind=f.kind,
            percent=float(percent[i]),
            hits=int(hits[i]),
            shared=int(shared[i]),
            query_in_file=float(shared[i]) / len(query),
            file_in_query=float(shared[i]) / max(1, f.n_distinct),
            exact=f.size == scan.size and f.digest == scan.digest,
        )
        if m.score(by) >= threshold:
            out.append(m)
    out.sort(key=lambda m: (-m.score(by), m.path))
    return out


def query_files(
    paths: Iterable[str | os.PathLike[str]],
    reader: IndexReader,
    params: FingerprintParams | None = None,
    *,
    threshold: float = 50.0,
    by: str = "percent",
    min_shared: int | None = None,
    on_warning: WarningSink = ignore_warning,
) -> Iterator[QueryResult]:
    """Query the index with each file of ``paths``, which need not be in the indexed tree.

    ``params`` default to those of the last ``sif index`` run; see
    :func:`resolve_params` for the mismatch error. An unreadable query file
    is a warning. Cost per file: one read of it, then :func:`match_scan`.
    """
    params, anchors = resolve_params(reader, params)
    for path in paths:
        name = os.fspath(path)
        try:
            st = os.stat(name)
            scan = scan_file(name, params, anchors)
        except OSError as exc:
            on_warning(ScanWarning(name, exc.strerror or str(exc)))
            continue
        matches = match_scan(
            reader,
            params,
            scan,
            threshold=threshold,
            by=by,
            min_shared=min_shared,
            exclude=(st.st_dev, st.st_ino),
        )
        yield QueryResult(
            name, scan.size, scan.kind, scan.digest, len(scan.fingerprints), tuple(matches)
        )
