"""Groups (section 4, first version) and interesting sets (second version) of similar pairs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError
from sif.similar.model import (
    SETS,
    GroupMember,
    SimilarFile,
    SimilarGroup,
    SimilarPair,
    SimilarSet,
)

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Bron-Kerbosch steps allowed per connected component before the greedy cover.
CLIQUE_BUDGET = 20_000


# --- interesting sets -------------------------------------------------------------


def _components(nodes: Sequence[int], adj: dict[int, set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    out: list[list[int]] = []
    for n in nodes:
        if n in seen:
            continue
        comp, stack = [], [n]
        seen.add(n)
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in adj[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        out.append(sorted(comp))
    return out


def _cliques(comp: list[int], adj: dict[int, set[int]], budget: int) -> list[frozenset[int]]:
    """Maximal cliques of one component: Bron-Kerbosch with pivoting, then greedy.

    Listing all maximal cliques is exponential in the worst case (and the
    paper's "interesting sets" problem is NP-complete), so the search stops
    after ``budget`` steps; the vertices it has not yet covered are then
    covered greedily: from the highest-degree uncovered vertex, add the
    neighbour with most neighbours in the clique so far, until none is
    adjacent to all; every set so found is maximal, but some maximal sets
    may be missed.
    """
    found: list[frozenset[int]] = []
    steps = 0

    def bk(r: set[int], p: set[int], x: set[int]) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            return False
        if not p and not x:
            found.append(frozenset(r))
            return True
        pivot = max(p | x, key=lambda u: len(adj[u] & p))
        for v in list(p - adj[pivot]):
            if not bk(r | {v}, p & adj[v], x & adj[v]):
                return False
            p.discard(v)
            x.add(v)
        return True

    if bk(set(), set(comp), set()):
        return found
    covered = set().union(*found) if found else set()
    for v in sorted(comp, key=lambda u: (-len(adj[u]), u)):
        if v in covered:
            continue
        clique = {v}
        cand = set(adj[v])
        while cand:
            best = max(sorted(cand), key=lambda u: len(adj[u] & cand))
            clique.add(best)
            cand &= adj[best]
        found.append(frozenset(clique))
        covered |= clique
    return list(dict.fromkeys(found))


def similar_sets(pairs: Sequence[SimilarPair], kind: str) -> list[SimilarSet]:
    """The paper's "interesting sets" (section 4, second version) from the kept pairs.

    ``kind="cliques"``: maximal sets whose members are pairwise similar (each
    pair above the threshold), see :func:`_cliques` for the bounded search;
    ``"components"``: connected components of the similarity graph (any
    chain of similar pairs). Each set lists, for each file, its least score
    with the other members (for a component, with its neighbours in it).
    Sorted by size, then path. Cost: O(pairs) for components; bounded per
    component for cliques.
    """
    if kind not in SETS:
        raise ConfigError(f"unknown sets {kind!r} (choose from {', '.join(SETS)})")
    adj: dict[int, set[int]] = {}
    files: dict[int, SimilarFile] = {}
    score: dict[tuple[int, int], float] = {}
    for p in pairs:
        adj.setdefault(p.a.id, set()).add(p.b.id)
        adj.setdefault(p.b.id, set()).add(p.a.id)
        files[p.a.id], files[p.b.id] = p.a, p.b
        score[(p.a.id, p.b.id)] = score[(p.b.id, p.a.id)] = p.score
    nodes = sorted(adj, key=lambda i: files[i].path)
    comps = _components(nodes, adj)
    groups: list[frozenset[int]] = []
    for comp in comps:
        if kind == "components":
            groups.append(frozenset(comp))
        else:
            groups.extend(_cliques(comp, adj, CLIQUE_BUDGET))
    out: list[SimilarSet] = []
    for g in groups:
        members = sorted(g, key=lambda i: files[i].path)
        least = tuple(
            min(score[(i, j)] for j in members if j != i and (i, j) in score) for i in members
        )
        out.append(SimilarSet(tuple(files[i] for i in members), least))
    out.sort(key=lambda s: (-len(s.files), s.files[0].path))
    return out


# --- groups (section 4, first version) --------------------------------------------


def similar_groups(pairs: Sequence[SimilarPair]) -> list[SimilarGroup]:
    """Each file as a reference with the files similar to it; each distinct set once.

    As the paper: references in turn (here by path), members best first
    (score, then path); a group whose set of files (reference included) was
    already reported is skipped, since the percentages would differ only
    slightly. Cost: O(pairs log pairs).
    """
    by_file: dict[int, list[SimilarPair]] = {}
    files: dict[int, SimilarFile] = {}
    for p in pairs:
        by_file.setdefault(p.a.id, []).append(p)
        by_file.setdefault(p.b.id, []).append(p)
        files[p.a.id], files[p.b.id] = p.a, p.b
    seen: set[frozenset[int]] = set()
    out: list[SimilarGroup] = []
    for fid in sorted(by_file, key=lambda i: files[i].path):
        ref = files[fid]
        members = [
            GroupMember(p.other(ref), p.percent_for(ref), p.score, p.identical, p.exact, p)
            for p in by_file[fid]
        ]
        key = frozenset([fid, *(m.file.id for m in members)])
        if key in seen:
            continue
        seen.add(key)
        members.sort(key=lambda m: (-m.score, m.file.path))
        out.append(SimilarGroup(ref, tuple(members)))
    return out
