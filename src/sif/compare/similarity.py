"""Pass 3 of ``sif compare``: similar files of the two trees, through the index.

Both trees are brought into the index (:func:`sif.build_index`: only new
and changed files are read), then each file left over on one side is
queried against it (:func:`sif.query_files`, one-against-all, exact
containments over all windows by default); a match is kept when it is a
file of the other tree. Querying only what is left keeps the cost with
the files that moved and changed, not with the whole trees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sif.compare.model import CompareStats
from sif.events import WarningSink
from sif.walk import WalkOptions

Candidate = tuple[str, str, float, float, bool]


def candidate_pairs(
    ra: str,
    rb: str,
    rel_a: Mapping[str, str],
    rel_b: Mapping[str, str],
    query_a: Sequence[str],
    query_b: Sequence[str],
    index: str,
    *,
    threshold: float,
    exact: bool,
    options: WalkOptions,
    jobs: int,
    wait: bool,
    on_warning: WarningSink,
    stats: CompareStats,
) -> list[Candidate]:
    """Pairs (A's relative path, B's, C(A,B), C(B,A), exact) at ``threshold`` or more.

    ``rel_a``/``rel_b``: each file's (or member's) path, as the index names
    it, -> its path relative to its tree. ``query_a`` (files of A, or A's
    archive) are matched with any file of B, ``query_b`` with any file of
    A; each pair once.
    """
    from sif.index import build_index, open_reader
    from sif.index.build import DEFAULT_PARAMS
    from sif.query import query_files

    stats.index = build_index(
        [ra, rb], index, options=options, jobs=jobs, wait=wait, on_warning=on_warning
    )
    found: dict[tuple[str, str], Candidate] = {}
    reader = open_reader(index)
    try:
        for queries, own, other in ((query_a, rel_a, rel_b), (query_b, rel_b, rel_a)):
            if not queries:
                continue
            stats.queried += len(queries)
            for q in query_files(
                queries,
                reader,
                DEFAULT_PARAMS,
                normalize="auto",
                threshold=threshold,
                by="containment",
                exact=exact,
                on_warning=on_warning,
            ):
                qrel = own.get(q.path)
                if qrel is None:
                    continue
                for m in q.matches:
                    mrel = other.get(m.path)
                    if mrel is None:
                        continue
                    qf, fq = m.query_in_file, m.file_in_query
                    if m.scored_exactly:
                        qf, fq = m.exact_query_in_file or 0.0, m.exact_file_in_query or 0.0
                    if own is rel_a:
                        c: Candidate = (qrel, mrel, qf, fq, m.scored_exactly)
                    else:
                        c = (mrel, qrel, fq, qf, m.scored_exactly)
                    found.setdefault((c[0], c[1]), c)
    finally:
        reader.close()
    return sorted(found.values())
