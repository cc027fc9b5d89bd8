"""One-against-all (Manber, section 3): the indexed entries similar to a query file.

A query file becomes its entries (content views, :mod:`sif.content`), each
compared only with indexed entries of the same kind and view, under one
parameter set (fingerprint parameters and normalisation mode: never mixed).
For a query entry Q and an indexed entry B:

- ``similarity``: the estimate of C(Q in B), the share of Q's distinct
  50-byte windows that B holds. Every window of Q is looked up (sampled
  down to :data:`sif.core.windows.MAX_LOOKUPS` for a long query), B's
  stored fingerprints are a sample of B's windows chosen by B alone, so the
  share of them found among Q's windows estimates C(B in Q) without bias,
  and C(Q in B) follows by the ratio of their window counts
  (:mod:`sif.core.windows`). Standard error about ``sqrt(c (1 - c) / n)``
  for B's ``n`` distinct fingerprints: 4.6 points for a 29 KB file at 36%;
- ``file_in_query``: the estimate of C(B in Q), the same way;
- ``percent``, the paper's figure: the rows of B whose value is among Q's
  own fingerprints, as a percentage of them. Counted with multiplicity, so
  it can exceed 100% (the paper's footnote 3); winnowing makes it run low
  on edited files (a surviving window selected in Q may lose to a changed
  neighbour in B): 26% where 36% of the windows survived;
- ``exact``: same size and same BLAKE3 digest of the entry's content.

The threshold (``-t``) applies to ``similarity`` by default: "how much of
the query does this file hold", the paper's question, estimated without
winnowing's bias. ``by="containment"`` applies it to the larger of the two
estimates (DESIGN's score for ``sif similar``: the smaller file contained in
the larger; a small file sharing a licence header with the query then
scores high), ``by="percent"`` to the paper's figure. ``min_shared``
(default 2; 1 for ``percent``) is the least number of distinct values of B
found: one chance or boilerplate window must not make a file similar.
Stored values have 32 bits: a lookup meets a random row with probability
rows / 2^32, which adds ``lookups / 2^32`` (at most 0.002% with
``MAX_LOOKUPS``) to each estimate of C(B in Q).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.core.evidence import (
    CANDIDATE_Z,
    FAST_LOWER_SHARE,
    INTERVAL_Z,
    score_bounds,
    share_bounds,
)
from sif.core.windows import containment, distinct, distinct_windows, in_sorted
from sif.errors import ConfigError, IndexParamsMismatch
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fingerprint import FingerprintParams
from sif.index.scan import U32, ScannedFile, scan_entries
from sif.index.store import IndexedFile, IndexReader, ParamSet, kind_code, param_set, view_code

I64 = npt.NDArray[np.int64]

SCORES = ("similarity", "containment", "percent")


@dataclass(frozen=True)
class Match:
    """An indexed entry similar to a query entry. Shares are fractions in [0, 1].

    ``query_in_file`` is the similarity (estimated C(query in file)),
    ``file_in_query`` the estimated C(file in query); ``percent`` the
    paper's figure; ``hits`` the file's rows among the query's own
    fingerprints; ``shared`` its distinct values found among the query's
    (sampled) windows.
    """

    path: str
    size: int
    kind: str
    percent: float
    hits: int
    shared: int
    query_in_file: float
    file_in_query: float
    exact: bool
    view: str = "raw"
    file_size: int | None = None
    """The size of the file on disk, when the entry is a whole file (``size`` is its
    content's: decompressed, or the view's, such as an ELF's strings); ``None`` for a
    member or when the file changed since it was indexed."""
    exact_query_in_file: float | None = None
    """C(query in file) over all windows, when scored exactly (the default), else ``None``."""
    exact_file_in_query: float | None = None
    score_low: float | None = None
    """With an estimate: the 90% interval of :meth:`score` (percent); ``None`` when exact."""
    score_high: float | None = None

    @property
    def scored_exactly(self) -> bool:
        """Whether the containments behind :meth:`score` are exact (else sampled estimates)."""
        return self.exact_query_in_file is not None and self.exact_file_in_query is not None

    def score(self, by: str) -> float:
        """The figure the threshold applies to, in percent: exact when known."""
        if by == "percent":
            return self.percent
        qf, fq = self.query_in_file, self.file_in_query
        if self.exact_query_in_file is not None and self.exact_file_in_query is not None:
            qf, fq = self.exact_query_in_file, self.exact_file_in_query
        if by == "similarity":
            return 100.0 * qf
        return 100.0 * max(qf, fq)


@dataclass(frozen=True)
class QueryResult:
    """A query entry and its matches, best first. ``view`` is its view's label."""

    path: str
    size: int
    kind: str
    digest: bytes
    n_fp: int
    matches: tuple[Match, ...]
    view: str = "raw"
    by: str = "similarity"
    """The score the threshold was compared with (:meth:`Match.score`)."""
    file_size: int | None = None
    """The size of the query file on disk when the entry is the whole file, else ``None``."""


def resolve_params(
    reader: IndexReader,
    params: FingerprintParams | ParamSet | None,
    where: str = "the index",
    normalize: str | None = None,
) -> tuple[ParamSet, AnchorSet | None]:
    """The parameter set to query with: the one asked for, else the last ``sif index`` run's.

    ``params`` and ``normalize`` each narrow the choice (``None``: any);
    among the index's sets that fit, the most recent wins. Raises
    :class:`IndexParamsMismatch` when none fits: values made under other
    parameters, or from another normalisation, are never compared.
    """
    sets = reader.parameter_sets()
    if not sets:
        raise IndexParamsMismatch(f"{where} holds no fingerprints yet")
    if isinstance(params, ParamSet):
        normalize = normalize or params.normalize
        params = params.params
    fits = [
        s
        for s in sets
        if (params is None or s.params == params)
        and (normalize is None or s.normalize == normalize)
    ]
    if not fits:
        from sif.index.store import describe_params

        held = "; ".join(str(s) for s in sets)
        asked = " ".join(
            x
            for x in (
                describe_params(params) if params is not None else "",
                f"normalize={normalize}" if normalize else "",
            )
            if x
        )
        raise IndexParamsMismatch(
            f"{where} holds: {held}; asked: {asked}; use the same options "
            "(or none, for the index's last), another --index, or run 'sif index' with them"
        )
    return fits[0], reader.anchors(fits[0])


def match_scan(
    reader: IndexReader,
    params: FingerprintParams | ParamSet,
    scan: ScannedFile,
    *,
    threshold: float = 50.0,
    by: str = "similarity",
    min_shared: int | None = None,
    exclude: tuple[int, int] | tuple[int, int, str] | None = None,
    exact: I64 | None = None,
    on_warning: WarningSink = ignore_warning,
) -> list[Match]:
    """Score every indexed entry of ``scan``'s kind and view that shares a value with it.

    ``scan`` should carry its window sample (``scan_entries(..., windows=True)``);
    without one its own fingerprints stand in, and the estimates inherit
    winnowing's bias. ``exclude`` is the (device, inode[, member]) of the
    query entry, left out when it is indexed. ``exact``: the query's window
    set S(Q) (:func:`sif.core.exactsets.window_set`); then every entry whose
    sampled score could reach the threshold (its 97.7% upper bound does) is read
    again and scored exactly (:class:`sif.windowsets.WindowSets`; one that
    changed since it was indexed keeps its estimate, with its interval).
    Returns the entries at ``threshold`` or above, by score, best first, then
    path. Raises
    :class:`ConfigError` for an unknown ``by``. Cost: one lookup of the
    distinct query values (at most ``MAX_LOOKUPS`` plus its fingerprints),
    vectorised scoring, then a description of the entries kept.
    """
    if by not in SCORES:
        raise ConfigError(f"unknown score {by!r} (choose from {', '.join(SCORES)})")
    check_threshold(threshold)
    if min_shared is None:
        min_shared = 1 if by == "percent" else 2
    ps = param_set(params)
    fps = np.asarray(scan.fingerprints, dtype=np.uint32)
    n = len(fps)
    own: U32 = distinct(fps)
    sample: U32 = own if scan.windows is None else scan.windows
    scale = 1 if scan.windows is None else scan.scale
    query: U32 = distinct(np.concatenate((own, sample)))
    if len(query) == 0:
        # No window (a file under the window's length): its exact copies, by digest.
        if scan.size == 0:
            return []
        file_ids = reader.same_content(ps, scan.size, scan.digest)
        qpos, inverse = np.empty(0, np.int64), np.empty(0, np.int64)
    else:
        qpos, ids = reader.lookup(ps, query)
        file_ids, inverse = np.unique(ids, return_inverse=True)
    if len(file_ids) == 0:
        return []
    # The paper's hits: rows of each file among the query's own fingerprints.
    hits = np.bincount(inverse, weights=in_sorted(query, own)[qpos], minlength=len(file_ids))
    # Distinct values of each file among the query's sampled windows.
    sampled = in_sorted(query, sample)[qpos]
    pairs = distinct((inverse[sampled].astype(np.int64) << 32) | qpos[sampled])
    shared = np.bincount(pairs >> 32, minlength=len(file_ids)).astype(np.float64)
    st = reader.file_stats(ps, file_ids)
    same = st.found & (st.kind == kind_code(scan.kind)) & (st.view == view_code(scan.view))
    window = ps.params.window
    q_in_b, b_in_q = containment(
        shared,
        scale,
        st.n_distinct.astype(np.float64),
        distinct_windows(st.size, st.n_fp, st.n_distinct, window),
        float(distinct_windows(scan.size, n, len(own), window)),
    )
    percent = 100.0 * hits / max(n, 1)
    # Exact copies (same size and digest) hold all of each other: 100, whatever the
    # estimate. Only files of the query's size and fingerprint count can be one.
    exact_copy = np.zeros(len(file_ids), dtype=bool)
    maybe = np.flatnonzero(same & (st.size == scan.size) & (st.n_fp == n))
    if len(maybe):
        seen = reader.describe(ps, file_ids[maybe])
        exact_copy[maybe] = [
            (f := seen.get(int(file_ids[i]))) is not None and f.digest == scan.digest for i in maybe
        ]
    q_in_b = np.where(exact_copy, 1.0, q_in_b)
    b_in_q = np.where(exact_copy, 1.0, b_in_q)
    percent = np.where(exact_copy & (n == 0), 100.0, percent)
    score = {
        "percent": percent,
        "similarity": 100.0 * q_in_b,
        "containment": 100.0 * np.maximum(q_in_b, b_in_q),
    }[by]
    # A file with fewer distinct values than min_shared needs them all.
    least = np.minimum(min_shared, np.maximum(st.n_distinct, 1))
    low, high = score_bounds(shared, score, INTERVAL_Z)
    # An estimate is believed with enough evidence: the lower end of its interval at
    # half the threshold (the paper's percentage is a count: no interval).
    evidence = (low >= FAST_LOWER_SHARE * threshold) | (by == "percent")
    estimated = same & (((shared >= least) & evidence) | exact_copy) & (score >= threshold)
    if exact is not None and by != "percent":
        _, reach = score_bounds(shared, score, CANDIDATE_Z)
        cand = same & ((shared >= 1) | exact_copy) & (reach >= threshold)
    else:
        cand = estimated
    picked = np.flatnonzero(cand)
    info = reader.describe(ps, file_ids[picked])
    scored: dict[int, tuple[float, float, int, int]] = {}
    if exact is not None and by != "percent":
        b_windows = distinct_windows(st.size, st.n_fp, st.n_distinct, window)
        est = {int(file_ids[i]): int(b_windows[i]) for i in picked}
        scored = _exact_scores(info, exact, window, ps.normalize, on_warning, est)
    out: list[Match] = []
    for i in np.flatnonzero(cand):
        f = info.get(int(file_ids[i]))
        if f is None or (
            exclude is not None
            and (f.dev, f.ino) == exclude[:2]
            and (len(exclude) == 2 or f.member == exclude[2])
        ):
            continue
        got = (1.0, 1.0, 0, 0) if exact_copy[i] else scored.get(f.id)
        if got is None and not estimated[i]:
            continue  # not scored exactly (changed, unreadable) and the estimate falls short
        qb, bq = float(q_in_b[i]), float(b_in_q[i])
        ex: tuple[float, float] | None = None
        lo: float | None = None if by == "percent" else float(low[i])
        hi: float | None = None if by == "percent" else float(high[i])
        if got is not None and got[2] == 0:  # exact (n 0: not sampled)
            ex, lo, hi = (got[0], got[1]), None, None
        elif got is not None:  # on a window sample: an estimate, with its interval
            qb, bq = got[0], got[1]
            # The interval of the share the score is: of the query's sample or B's.
            n_of = got[2] if by == "similarity" or qb >= bq else got[3]
            b_lo, b_hi = share_bounds(qb if by == "similarity" else max(qb, bq), n_of, INTERVAL_Z)
            lo, hi = float(b_lo), float(b_hi)
        m = Match(
            path=f.path,
            file_size=_disk_size(f),
            size=f.size,
            kind=f.kind,
            percent=float(percent[i]),
            hits=int(hits[i]),
            shared=int(shared[i]),
            query_in_file=qb,
            file_in_query=bq,
            exact=bool(exact_copy[i]),
            view=f.view,
            exact_query_in_file=None if ex is None else ex[0],
            exact_file_in_query=None if ex is None else ex[1],
            score_low=lo,
            score_high=hi,
        )
        if m.score(by) >= threshold:
            out.append(m)
    out.sort(key=lambda m: (-m.score(by), m.path))
    return out


#: A query entry larger than this keeps sampled scores (its window set would need 8
#: bytes a byte): the scores are estimates, marked, with their intervals.
QUERY_EXACT_MAX_BYTES = 256 << 20


def _query_sets(scanned: list[Any], ps: ParamSet, on_warning: WarningSink) -> dict[str, I64]:
    """S(Q) of each scanned entry of a query file, by path (read again, checked by digest)."""
    from sif.windowsets import WindowSets

    sets = WindowSets(
        ps.params.window,
        QUERY_EXACT_MAX_BYTES,
        ps.normalize,
        {i: e.scan.digest for i, e in enumerate(scanned)},
        on_warning,
        jit=False,
    )
    srcs = [(e.path, e.origin, e.label) for e in scanned]
    for i, src in enumerate(srcs):
        if scanned[i].scan.size <= QUERY_EXACT_MAX_BYTES:
            sets.want(i, src)
    out: dict[str, I64] = {}
    for i, src in enumerate(srcs):
        if scanned[i].scan.size > QUERY_EXACT_MAX_BYTES:
            continue
        s = sets.get(i, src)
        if s is not None:
            out[src[0]] = s
    return out


#: Bytes of window sets a query keeps while scoring its candidates exactly.
QUERY_SETS_BYTES = 256 << 20


def _exact_scores(
    info: dict[int, IndexedFile],
    query: I64,
    window: int,
    normalize: str,
    on_warning: WarningSink,
    windows: dict[int, int] | None = None,
) -> dict[int, tuple[float, float, int, int]]:
    """(C(Q in B), C(B in Q), n_q, n_b) over all windows for the entries ``info``, read
    again.

    A pair whose smaller side has at least ``2 * SAMPLE_FROM`` distinct windows
    (``windows``: each entry's, estimated from its fingerprints; the query's
    set is known) is scored on the window sample ``sif similar`` takes
    (:func:`sif.core.exactsets.sample_shift`, the same windows in both):
    ``n_q`` and ``n_b`` are then the values of each side's sample (the
    intervals' sizes of C(Q in B) and C(B in Q)), else 0.
    So an entry's set is a few MB whatever its size: a 100 MB candidate's full
    set was 800 MB. An entry that changed since it was indexed, or cannot be
    read, is left out (it keeps its estimate), as is a sampled pair whose
    smaller sample holds under a quarter of ``SAMPLE_FROM`` values (windows
    repeated beyond what the fingerprints told). numpy only: a query does not
    load numba. Cost: one read and one sorted window set per entry.
    """
    from sif.core.exactsets import SAMPLE_FROM, intersection_size, sample_shift, sampled
    from sif.windowsets import WindowSets

    windows = windows or {}
    shifts = {
        f.id: int(sample_shift(np.array([min(len(query), windows.get(f.id, len(query)))]))[0])
        for f in info.values()
    }
    sets = WindowSets(
        window,
        QUERY_SETS_BYTES,
        normalize,
        {f.id: f.digest for f in info.values()},
        on_warning,
        jit=False,
        shifts={fid: r for fid, r in shifts.items() if r},
    )
    srcs = {f.id: (f.path, f.path[: len(f.path) - len(f.member)], f.view) for f in info.values()}
    for fid, src in srcs.items():
        sets.want(fid, src)
    out: dict[int, tuple[float, float, int, int]] = {}
    query_at: dict[int, I64] = {0: query}  # S(Q)'s samples, by shift
    for fid, src in srcs.items():
        sb = sets.get(fid, src)
        if sb is None:
            continue
        r = shifts[fid]
        sq = query_at.get(r)
        if sq is None:
            sq = query_at[r] = sampled(query, r)
        sets.release(fid, src)
        if r and min(len(sq), len(sb)) < SAMPLE_FROM // 4:
            continue  # too few values to tell: the estimate stays
        inter = intersection_size(sq, sb)
        nq, nb = (len(sq), len(sb)) if r else (0, 0)
        out[fid] = (inter / max(len(sq), 1), inter / max(len(sb), 1), nq, nb)
    return out


def _disk_size(f: IndexedFile) -> int | None:
    """The size on disk of the whole file ``f`` as indexed, or ``None`` (a member, or
    the file changed or went since). Cost: one ``stat``."""
    if f.member:
        return None
    try:
        st = os.stat(f.path)
    except OSError:
        return None
    if (st.st_dev, st.st_ino, st.st_mtime_ns) != (f.dev, f.ino, f.mtime_ns):
        return None
    return st.st_size


def check_threshold(threshold: float) -> None:
    """``threshold`` is a percentage in 0..100 (:class:`ConfigError` otherwise).

    With ``by="percent"`` the score itself can exceed 100 (multiplicity): such
    a file passes any threshold.
    """
    if not 0 <= threshold <= 100:
        raise ConfigError(f"threshold must be in 0..100, got {threshold:g}")


def query_files(
    paths: Iterable[str | os.PathLike[str]],
    reader: IndexReader,
    params: FingerprintParams | ParamSet | None = None,
    *,
    normalize: str | None = None,
    threshold: float = 50.0,
    by: str = "similarity",
    min_shared: int | None = None,
    exact: bool = True,
    on_warning: WarningSink = ignore_warning,
) -> Iterator[QueryResult]:
    """Query the index with each entry of each file of ``paths`` (which need not be indexed).

    The parameter set is chosen by :func:`resolve_params` (``params`` and
    ``normalize`` narrow it; by default the last ``sif index`` run's), and
    the query files become entries under its normalisation: an archive
    gives one result per member (``a.zip!/x.txt``). An unreadable query
    file, or a problem inside one, is a warning. ``exact`` (the default):
    scores are exact containments over all windows (:func:`match_scan`);
    ``False`` keeps the sampled estimates (``--fast``). Cost per file: one
    read of it (plus decompression), then :func:`match_scan` per entry (and,
    with ``exact``, a second read of the query and one read of each candidate).
    """
    from sif.fileio import kind_name
    from sif.records import FileRecord

    check_threshold(threshold)
    ps, anchors = resolve_params(reader, params, normalize=normalize)
    content = ContentOptions(normalize=ps.normalize)
    for path in paths:
        name = os.fspath(path)
        try:
            st = os.stat(name)
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block, a device never end
                raise OSError(f"not a regular file ({kind_name(st.st_mode)})")
            # Read only the file stat'ed here (a FIFO swapped in meanwhile is refused).
            record = FileRecord(
                name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, symlink=True
            )
            scanned = scan_entries(
                name,
                ps.params,
                anchors,
                content,
                record=record,
                windows=True,
                on_warning=on_warning,
            )
        except OSError as exc:
            on_warning(ScanWarning(name, exc.strerror or str(exc)))
            continue
        query_sets = _query_sets(scanned, ps, on_warning) if exact else {}
        for e in scanned:
            matches = match_scan(
                reader,
                ps,
                e.scan,
                threshold=threshold,
                by=by,
                min_shared=min_shared,
                exclude=(st.st_dev, st.st_ino, e.path[len(e.origin) :]),
                exact=query_sets.get(e.path),
                on_warning=on_warning,
            )
            yield QueryResult(
                e.path,
                e.scan.size,
                e.scan.kind,
                e.scan.digest,
                len(e.scan.fingerprints),
                tuple(matches),
                e.label,
                by,
                st.st_size if e.path == e.origin else None,
            )
