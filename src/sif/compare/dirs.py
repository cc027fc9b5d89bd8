"""Directories by content in one set of trees: ``sif similar --dirs``, ``sif dupes --dirs``.

**Similar directories** (:func:`similar_directories`) come from the file
pairs of ``sif similar`` (exact containments by default; identical files
are pairs at 100): for two directories D and E, neither inside the other,
the share of D's bytes found in E is the sum, over D's files (recursively),
of each file's size times its best containment in a file under E, over D's
bytes; the same for E. A pair is reported when both shares reach the
threshold. A pair is left out when a pair of directories holding both
(each the directory or one above it) is reported: the children add
nothing to their parents' pair (dupeGuru's folder mode).

**Identical directories** (:func:`identical_directories`) come from the
groups of exact replicas (``sif dupes``): a directory's content is the
multiset of its files' contents, recursively (with ``match_names``, each
paired with its path inside the directory); directories of equal content,
none inside another, form a group (rmlint ``-D``). A group is left out when
its directories' parents all belong to one other group, and a directory
is left out of one when its parent's copy is already represented there.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sif.events import WarningSink, ignore_warning
from sif.walk import WalkOptions, walk


@dataclass(frozen=True)
class DirectoryPair:
    """Two directories whose contents are largely the same; shares are fractions."""

    a: str
    b: str
    a_in_b: float
    b_in_a: float
    bytes_a: int
    bytes_b: int
    files_a: int
    files_b: int


@dataclass(frozen=True)
class DirectoryGroup:
    """Directories with identical content (``files`` files, ``bytes`` bytes each)."""

    paths: tuple[str, ...]
    files: int
    bytes: int


def _root_of(path: str, roots: Sequence[str]) -> str:
    best = ""
    for r in roots:
        if (path == r or path.startswith(r.rstrip(os.sep) + os.sep)) and len(r) > len(best):
            best = r
    return best


def _dirs_up(path: str, root: str) -> Iterator[str]:
    """The directories holding ``path``, deepest first, down to ``root`` included."""
    d = os.path.dirname(path)
    while True:
        yield d
        if d == root or len(d) <= len(root) or d == os.path.dirname(d):
            return
        d = os.path.dirname(d)


def _nested(d: str, e: str) -> bool:
    return (
        d == e or d.startswith(e.rstrip(os.sep) + os.sep) or e.startswith(d.rstrip(os.sep) + os.sep)
    )


def _tree(
    roots: Sequence[str], options: WalkOptions, on_warning: WarningSink
) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """Bytes and files of every directory under ``roots``, and each file's root."""
    size: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    root_of: dict[str, str] = {}
    for root in roots:
        for rec in walk([root], options, on_warning):
            root_of[rec.path] = root
            for d in _dirs_up(rec.path, root):
                size[d] += rec.size
                count[d] += 1
    return size, count, root_of


def similar_directories(
    pairs: Iterable[Any],
    roots: Sequence[str | os.PathLike[str]],
    threshold: float = 50.0,
    *,
    walk_options: WalkOptions | None = None,
    on_warning: WarningSink = ignore_warning,
) -> list[DirectoryPair]:
    """Pairs of directories under ``roots`` from file ``pairs`` (:class:`sif.SimilarPair`).

    ``threshold``: least share of each directory's bytes found in the other,
    in percent. The directories' bytes come from a stat walk of ``roots``
    (``walk_options``: the filters the pairs were made with). Archive
    members are left out. Best pairs first (the smaller share).
    """
    rl = [os.path.abspath(os.fspath(r)) for r in roots]
    size, count, root_of = _tree(rl, walk_options or WalkOptions(), on_warning)
    # best[f][E]: f's best containment in a file under the directory E.
    best: dict[str, dict[str, float]] = defaultdict(dict)
    fsize: dict[str, int] = {}
    for p in pairs:
        a, b = p.a.path, p.b.path
        if "!/" in a or "!/" in b:
            continue
        ab = p.exact_a_in_b if p.exact_a_in_b is not None else p.a_in_b
        ba = p.exact_b_in_a if p.exact_b_in_a is not None else p.b_in_a
        for x, y, c, n in ((a, b, ab, p.a.size), (b, a, ba, p.b.size)):
            ry = root_of.get(y) or _root_of(y, rl)
            fsize[x] = n
            bx = best[x]
            for e in _dirs_up(y, ry):
                if bx.get(e, -1.0) < c:
                    bx[e] = c
    held: dict[tuple[str, str], float] = defaultdict(float)
    for x, bx in best.items():
        rx = root_of.get(x) or _root_of(x, rl)
        ups = list(_dirs_up(x, rx))
        for e, c in bx.items():
            for d in ups:
                if not _nested(d, e):
                    held[(d, e)] += fsize[x] * c
    t = threshold / 100.0
    found: dict[frozenset[str], DirectoryPair] = {}
    for (d, e), h in held.items():
        if d > e or (e, d) not in held:
            continue
        sd, se = h / max(size[d], 1), held[(e, d)] / max(size[e], 1)
        sd, se = min(sd, 1.0), min(se, 1.0)
        if min(sd, se) >= t:
            found[frozenset((d, e))] = DirectoryPair(
                d, e, sd, se, size[d], size[e], count[d], count[e]
            )
    out = []
    for key, pair in found.items():
        ups_a = [pair.a, *_parents(pair.a, rl)]
        ups_b = [pair.b, *_parents(pair.b, rl)]
        if any(
            frozenset((x, y)) in found and frozenset((x, y)) != key
            for x in ups_a
            for y in ups_b
            if x != y
        ):
            continue
        out.append(pair)
    out.sort(key=lambda p: (-min(p.a_in_b, p.b_in_a), -(p.bytes_a + p.bytes_b), p.a, p.b))
    return out


def _parents(d: str, roots: Sequence[str]) -> list[str]:
    root = _root_of(d, roots)
    out = []
    while d != root and len(d) > len(root):
        d = os.path.dirname(d)
        out.append(d)
    return out


def identical_directories(
    roots: Sequence[str | os.PathLike[str]],
    groups: Iterable[Any],
    *,
    match_names: bool = False,
    walk_options: WalkOptions | None = None,
    on_warning: WarningSink = ignore_warning,
) -> list[DirectoryGroup]:
    """Groups of directories under ``roots`` whose whole content is identical.

    ``groups``: the replica groups of the same roots (:func:`sif.find_duplicates`,
    with the same filters as ``walk_options``); a file in none is unique and
    its directories can equal no other. ``match_names``: the files' paths
    inside the directories must be equal too. Largest first.
    """
    token: dict[str, int] = {}
    for i, g in enumerate(groups):
        for path in g.all_paths:
            token[path] = i
    rl = [os.fspath(r) for r in roots]
    contents: dict[str, list[tuple[str, int]]] = defaultdict(list)
    size: dict[str, int] = defaultdict(int)
    unique: set[str] = set()
    for root in rl:
        for rec in walk([root], walk_options or WalkOptions(), on_warning):
            t = token.get(rec.path)
            for d in _dirs_up(rec.path, root):
                if t is None:
                    unique.add(d)
                elif d not in unique:
                    contents[d].append((os.path.relpath(rec.path, d) if match_names else "", t))
                size[d] += rec.size
    by_sig: dict[bytes, list[str]] = defaultdict(list)
    for d, items in contents.items():
        if d in unique:
            continue
        sig = hashlib.blake2b(repr(sorted(items)).encode("utf-8", "surrogateescape")).digest()
        by_sig[sig].append(d)
    member: dict[str, int] = {}
    cands: list[list[str]] = []
    for ds in by_sig.values():
        ds = sorted(ds)
        # None inside another: a directory holding only one subdirectory has its content.
        ds = [d for d in ds if not any(e != d and _nested(d, e) and len(e) > len(d) for e in ds)]
        if len(ds) > 1:
            for d in ds:
                member[d] = len(cands)
            cands.append(ds)
    out = []
    for i, ds in enumerate(cands):
        # Directories whose parents are copies of each other (one other group) add
        # nothing but the first: a/x, b/x, c/x and d/x with a, b, c identical is a/x, d/x.
        kept, parents = [], set()
        for d in ds:
            pg = member.get(os.path.dirname(d))
            if pg is not None and pg != i:
                if pg in parents:
                    continue
                parents.add(pg)
            kept.append(d)
        if len(kept) > 1:
            out.append(DirectoryGroup(tuple(kept), len(contents[kept[0]]), size[kept[0]]))
    out.sort(key=lambda g: (-g.bytes, g.paths))
    return out
