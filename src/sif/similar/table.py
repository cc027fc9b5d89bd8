"""The kept pairs and the paper's groups as columns: values made only when read.

A run over a large tree keeps millions of pairs (990,893 at 25% on 100,000
generated files), and one Python object a pair, or two a group member, took
the main process to 1.5 GB before a line was written. Here the pairs above
the threshold stay numpy columns (:class:`PairTable`: about 90 bytes a pair),
sorted as the report shows them, and the groups (:class:`GroupTable`) are an
order of their reference files and an array of member rows. Both are
sequences: indexing or iterating makes the :class:`SimilarPair`,
:class:`SimilarGroup` and :class:`SimilarFile` values of that position only,
so a report streams them and memory stays that of the columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from sif.core.packed import same_items
from sif.similar.model import GroupMember, SimilarFile, SimilarGroup, SimilarPair

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]


def path_ranks(files: dict[str, Any], rows: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Each file's rank by decoded path among ``rows`` (file row positions), else -1.

    The decoded path (``os.fsdecode``) is the order of every report; only the
    files of ``rows`` are decoded. O(k log k) for k distinct rows.
    """
    index = np.int32 if len(files["id"]) < 2**31 else np.int64  # 4 bytes a file
    rank: npt.NDArray[Any] = np.full(len(files["id"]), -1, dtype=index)
    used = np.unique(rows)
    names = [os.fsdecode(bytes(p)) for p in files["path"][used]]
    order = sorted(range(len(names)), key=names.__getitem__)
    del names
    rank[used[np.asarray(order, dtype=np.int64)]] = np.arange(len(order), dtype=index)
    return rank


class _Rows(Sequence[Any]):
    """A sequence whose items are made from row ``i`` on demand; equal to equal sequences."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _item(self, i: int) -> Any:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return tuple(self._item(j) for j in range(*i.indices(len(self))))
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        return self._item(i % n if n else i)

    def __iter__(self) -> Iterator[Any]:
        for j in range(len(self)):
            yield self._item(j)

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self):,}>"


class PairTable(_Rows):
    """The pairs above the threshold, best first (score, then the paths of ``a`` and ``b``).

    Columns, one row a pair, ``a`` before ``b`` by path: ``ia``/``ib`` (rows of
    ``files``), ``shared``, the estimates ``a_in_b``/``b_in_a``/``jaccard``,
    the paper's percentages ``pa``/``pb`` (in percent), the exact
    containments ``exact_ab``/``exact_ba`` (NaN: not known), and the
    estimate's interval ``low``/``high`` (NaN when the score is exact).
    ``table[j]`` is the :class:`SimilarPair` of row ``j``.
    """

    def __init__(
        self,
        files: dict[str, npt.NDArray[Any]],
        cols: dict[str, npt.NDArray[Any]],
        take: bool = False,
    ):
        """``take``: the table takes the columns out of ``cols`` (emptied) as it orders
        them, so that each exists once beside its ordered copy (at a million files,
        1.1 M pairs: 12 columns of 9 MB each, held three times before)."""
        get = cols.pop if take else cols.__getitem__
        self.files = files
        n = len(cols["ia"])
        # Rows of files and counts in 32 bits (a million pairs: 12 MB less).
        index = np.int32 if len(files["id"]) < 2**31 else np.int64
        ia = np.asarray(get("ia"), dtype=index)
        ib = np.asarray(get("ib"), dtype=index)
        shared = np.asarray(get("shared"), dtype=np.uint32)

        def f(k: str) -> F64:
            return np.asarray(cols[k], dtype=np.float64)

        known = ~np.isnan(f("exact_ab")) & ~np.isnan(f("exact_ba"))
        with np.errstate(invalid="ignore"):
            score = np.where(
                known,
                100.0 * np.maximum(f("exact_ab"), f("exact_ba")),
                100.0 * np.maximum(f("a_in_b"), f("b_in_a")),
            )
        rank = path_ranks(files, np.concatenate([ia, ib])) if n else np.empty(0, index)
        swap = rank[ib] < rank[ia] if n else np.zeros(0, dtype=bool)
        ia, ib = np.where(swap, ib, ia), np.where(swap, ia, ib)
        order = np.lexsort((rank[ib], rank[ia], -score)) if n else np.empty(0, int)
        self.ia, self.ib, self.shared = ia[order], ib[order], shared[order]
        del ia, ib, shared
        self.score = score[order]
        self.known = known[order]
        self.rank = rank
        del score, known
        for x, y in (("a_in_b", "b_in_a"), ("pa", "pb"), ("exact_ab", "exact_ba")):
            fx, fy = np.asarray(get(x), dtype=np.float64), np.asarray(get(y), dtype=np.float64)
            setattr(self, x, np.where(swap, fy, fx)[order])
            setattr(self, y, np.where(swap, fx, fy)[order])
            del fx, fy
        for k in ("jaccard", "low", "high"):
            setattr(self, k, np.asarray(get(k), dtype=np.float64)[order])

    a_in_b: F64
    b_in_a: F64
    jaccard: F64
    pa: F64
    pb: F64
    exact_ab: F64
    exact_ba: F64
    low: F64
    high: F64

    def __len__(self) -> int:
        return len(self.ia)

    def file(self, i: int) -> SimilarFile:
        """The file at row ``i`` of ``files``."""
        f = self.files
        return SimilarFile(
            id=int(f["id"][i]),
            path=os.fsdecode(bytes(f["path"][i])),
            size=int(f["size"][i]),
            kind=str(f["kind"][i]),
            n_fp=int(f["n_fp"][i]),
            n_distinct=int(f["n_distinct"][i]),
            digest=bytes(f["digest"][i]),
        )

    def _item(self, j: int) -> SimilarPair:
        known = bool(self.known[j])
        ex_ab, ex_ba = float(self.exact_ab[j]), float(self.exact_ba[j])
        return SimilarPair(
            self.file(int(self.ia[j])),
            self.file(int(self.ib[j])),
            int(self.shared[j]),
            float(self.a_in_b[j]),
            float(self.b_in_a[j]),
            float(self.jaccard[j]),
            float(self.pa[j]),
            float(self.pb[j]),
            None if np.isnan(ex_ab) else ex_ab,
            None if np.isnan(ex_ba) else ex_ba,
            None if known else float(self.low[j]),
            None if known else float(self.high[j]),
        )

    def records(self, batch: int = 8192) -> Iterator[dict[str, Any]]:
        """The report's record of each pair, in order (:func:`sif.report.similar_record`'s
        fields and values), made a batch of rows at a time from the columns: no
        :class:`SimilarPair` or :class:`SimilarFile` a pair (100k json records: 85 us of
        Python a pair that way, most of the report's time)."""
        f = self.files
        for lo in range(0, len(self), batch):
            hi = min(len(self), lo + batch)
            ia, ib = self.ia[lo:hi], self.ib[lo:hi]
            used = np.unique(np.concatenate([ia, ib]))
            at = {
                int(r): (os.fsdecode(bytes(f["path"][r])), bytes(f["digest"][r]))
                for r in used.tolist()
            }
            size, kind, nd = f["size"], f["kind"], f["n_distinct"]
            known = self.known[lo:hi].tolist()
            cols = zip(
                ia.tolist(),
                ib.tolist(),
                size[ia].tolist(),
                size[ib].tolist(),
                [str(k) for k in kind[ia]],
                self.score[lo:hi].tolist(),
                known,
                self.low[lo:hi].tolist(),
                self.high[lo:hi].tolist(),
                self.exact_ab[lo:hi].tolist(),
                self.exact_ba[lo:hi].tolist(),
                self.a_in_b[lo:hi].tolist(),
                self.b_in_a[lo:hi].tolist(),
                self.jaccard[lo:hi].tolist(),
                self.shared[lo:hi].tolist(),
                nd[ia].tolist(),
                nd[ib].tolist(),
                self.pa[lo:hi].tolist(),
                self.pb[lo:hi].tolist(),
                strict=True,
            )
            for (
                a,
                b,
                sa,
                sb,
                k,
                sc,
                kn,
                low,
                high,
                xab,
                xba,
                ab,
                ba,
                jac,
                sh,
                na,
                nb,
                pa,
                pb,
            ) in cols:
                pa_, da = at[a]
                pb_, db = at[b]
                yield {
                    "a": pa_,
                    "b": pb_,
                    "size_a": sa,
                    "size_b": sb,
                    "kind": k,
                    "score": round(sc, 2),
                    "score_exact": kn,
                    "score_low": None if kn else round(low, 2),
                    "score_high": None if kn else round(high, 2),
                    "exact_a_in_b": None if xab != xab else round(100.0 * xab, 2),
                    "exact_b_in_a": None if xba != xba else round(100.0 * xba, 2),
                    "estimate_a_in_b": round(100.0 * ab, 2),
                    "estimate_b_in_a": round(100.0 * ba, 2),
                    "estimate_jaccard": round(100.0 * jac, 2),
                    "shared": sh,
                    "fingerprints_a": na,
                    "fingerprints_b": nb,
                    "percent_a_in_b": round(pa, 2),
                    "percent_b_in_a": round(pb, 2),
                    "identical": sa == sb and da == db,
                }


def _mix(x: U64, k: int) -> U64:
    """A 64-bit finaliser (splitmix64's) of ``x ^ k``, wrapping: a hash of a file id."""
    with np.errstate(over="ignore"):
        z = x ^ np.uint64(k)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class GroupTable(_Rows):
    """The paper's groups (section 4, first version) over a :class:`PairTable`.

    As :func:`sif.similar.sets.similar_groups`: each file in turn by path is a
    reference, with the files paired with it best first (score, then path); a
    group whose set of files (reference included) was already reported is
    skipped. Sets are compared by two independent 64-bit sums of hashed ids
    and their size (two different sets agree on all three with a chance of
    about 2^-128). Vectorised: O(pairs log pairs), no Python work a pair;
    ``table[k]`` makes the :class:`SimilarGroup` of the k-th kept reference.
    """

    def __init__(self, pairs: PairTable):
        self.pairs = pairs
        n = len(pairs)
        ref = np.concatenate([pairs.ia, pairs.ib])
        other = np.concatenate([pairs.ib, pairs.ia])
        row = np.concatenate([np.arange(n), np.arange(n)]).astype(pairs.ia.dtype)
        rank = pairs.rank
        # Rows are best first already: a stable sort by the reference's rank, then by
        # score and the other's rank, within a reference.
        order = np.lexsort((rank[other], -pairs.score[row], rank[ref]))
        self.ref, self.other, self.row = ref[order], other[order], row[order]
        starts = np.flatnonzero(np.r_[True, self.ref[1:] != self.ref[:-1]]) if n else np.empty(0)
        starts = starts.astype(np.int64)
        ends = np.r_[starts[1:], len(self.ref)].astype(np.int64)
        ids = np.asarray(pairs.files["id"], dtype=np.uint64)
        keys = []
        for k in (0x5EED, 0xC0FFEE):
            h = np.add.reduceat(_mix(ids[self.other], k), starts) if n else np.empty(0, np.uint64)
            with np.errstate(over="ignore"):
                keys.append(h + _mix(ids[self.ref[starts]], k))
        size = ends - starts
        if n:
            key = np.rec.fromarrays([keys[0], keys[1], size])
            _, first = np.unique(key, return_index=True)
            kept = np.sort(first)
        else:
            kept = np.empty(0, dtype=np.int64)
        self.starts, self.ends = starts[kept], ends[kept]

    def __len__(self) -> int:
        return len(self.starts)

    def rows(self, k: int) -> tuple[int, I64, I64]:
        """Group ``k`` as rows: its reference's row of ``files``, its members' rows
        of ``files`` and their rows of the :class:`PairTable`, best first."""
        s, e = int(self.starts[k]), int(self.ends[k])
        return int(self.ref[s]), self.other[s:e], self.row[s:e]

    def _item(self, k: int) -> SimilarGroup:
        p = self.pairs
        s, e = int(self.starts[k]), int(self.ends[k])
        reference = p.file(int(self.ref[s]))
        members = []
        for j in self.row[s:e]:
            pair = p[int(j)]
            members.append(
                GroupMember(
                    pair.other(reference),
                    pair.percent_for(reference),
                    pair.score,
                    pair.identical,
                    pair.exact,
                    pair,
                )
            )
        return SimilarGroup(reference, tuple(members))
