"""Pass 3 of ``sif compare``: similar files of the two trees, through the index.

Both trees are brought into the index (:func:`sif.build_index`: only new
and changed files are read), then each file left over on one side is
queried against it (:func:`sif.query_files`, one-against-all, exact
containments over all windows by default); a match is kept when it is a
file of the other tree. Querying only what is left keeps the cost with
the files that moved and changed, not with the whole trees.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from sif.compare.model import CompareStats
from sif.events import WarningSink
from sif.walk import WalkOptions

Candidate = tuple[str, str, float, float, bool]


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` when it is a plain file under it, else ``None``."""
    if "!/" in path[len(root) :] or not path.startswith(root + os.sep):
        return None
    return path[len(root) + 1 :]


def candidate_pairs(
    ra: str,
    rb: str,
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

    ``query_a`` (files of A) are matched with any file of B, ``query_b``
    with any file of A; each pair once.
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
        for queries, own, other in ((query_a, ra, rb), (query_b, rb, ra)):
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
                qrel = _under(q.path, own)
                if qrel is None:
                    continue
                for m in q.matches:
                    mrel = _under(m.path, other)
                    if mrel is None:
                        continue
                    qf, fq = m.query_in_file, m.file_in_query
                    if m.scored_exactly:
                        qf, fq = m.exact_query_in_file or 0.0, m.exact_file_in_query or 0.0
                    if own == ra:
                        c: Candidate = (qrel, mrel, qf, fq, m.scored_exactly)
                    else:
                        c = (mrel, qrel, fq, qf, m.scored_exactly)
                    found.setdefault((c[0], c[1]), c)
    finally:
        reader.close()
    return sorted(found.values())
