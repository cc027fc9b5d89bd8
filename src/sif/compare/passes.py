"""``sif compare A B``: every file of two trees accounted for, in four passes.

1. **Same relative path.** Equal size and BLAKE3 digest: ``same``; else
   ``changed``, with the exact containments C(A,B) and C(B,A) over all
   50-byte windows (:func:`sif.core.exactsets.window_set`), both files read
   once more; two large files (sets over :data:`sif.compare.large.EXACT_BYTES`)
   a step at a time, on a window sample (:mod:`sif.compare.large`).
2. **Exact content.** What is left of each side is grouped with all files
   of the other side by size, then by digest (only files whose size occurs
   on both sides are read). Within a group, files left on both sides pair
   one to one as ``moved`` (a rename is a move); the names decide between
   equal candidates (the pairs with the most similar names first). A file
   left over whose content the other side holds under a name already
   matched (a copy within one side) is a ``duplicate`` of that file.
3. **Fingerprints.** What is still left is queried against the index of
   both trees (:func:`sif.build_index`, then :func:`sif.query_files`, exact
   by default): a pair whose max(C(A,B), C(B,A)) reaches the threshold is
   ``moved+changed``, one to one among the files left over first (best
   score first, then the names), then a file left over with a file already
   matched (a file appended to another: ``a-in-b``).
4. What is left is ``only-a`` or ``only-b``.

A tree may be a zip or tar archive: its members are its files.

Names are only ever tie-breakers: content decides first.
"""

from __future__ import annotations

import difflib
import os
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import blake3

from sif.compare import large
from sif.compare.members import Members
from sif.compare.model import CONTAINED, CompareResult, CompareStats, FileComparison
from sif.compare.rollup import rollup
from sif.errors import ConfigError
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fileio import open_regular_file
from sif.walk import WalkOptions, walk

CHUNK = 1 << 20
#: A group of identical files larger than this (files of one side times the other's)
#: pairs by exact name, then by path order, instead of comparing every two names.
NAME_PAIRS_LIMIT = 4096


@dataclass
class TreeFile:
    """A file of one tree: its path relative to the root, the path, size and identity."""

    rel: str
    path: str
    size: int
    dev: int
    ino: int
    digest: bytes | None = None
    unreadable: bool = False
    archive: str | None = None
    """The archive holding this member (``path`` is then ``ARCHIVE!/MEMBER``)."""
    mtime_ns: int = 0
    ctime_ns: int = 0
    known: bytes | None = None
    """The index's digest of this very file (same identity and times), if it holds one."""


def list_tree(root: str, options: WalkOptions, on_warning: WarningSink) -> dict[str, TreeFile]:
    """The regular files under ``root`` (empty ones too), by relative path."""
    out: dict[str, TreeFile] = {}
    for rec in walk([root], options, on_warning):
        rel = os.path.relpath(rec.path, root)
        out[rel] = TreeFile(
            rel, rec.path, rec.size, rec.dev, rec.ino, mtime_ns=rec.mtime_ns, ctime_ns=rec.ctime_ns
        )
    return out


def known_digests(tree: dict[str, TreeFile], location: str) -> int:
    """Give each file of ``tree`` the index's digest of it, where the index holds this file.

    The file's device, inode, size, mtime and ctime must be those indexed
    (an edit with its mtime put back still changes the ctime), and its entry
    the whole file in the raw view (:func:`sif.index.digests.whole_files`).
    Such a file is not read again to be hashed: only its first bytes, to rule
    out a compressed stream (indexed by its decompressed content). Returns
    how many files got one.
    """
    from sif.index.build import DEFAULT_PARAMS
    from sif.index.digests import whole_files
    from sif.index.store import ParamSet

    known = whole_files(location, ParamSet(DEFAULT_PARAMS, "auto"))
    n = 0
    for f in tree.values():
        k = known.get(f.path)
        if k is None or f.archive is not None:
            continue
        same = (k.dev, k.ino, k.file_size, k.mtime_ns, k.ctime_ns, k.size)
        if same == (f.dev, f.ino, f.size, f.mtime_ns, f.ctime_ns, f.size):
            f.known = k.digest
            n += 1
    return n


def list_archive(root: str, on_warning: WarningSink) -> dict[str, TreeFile]:
    """The members of the archive ``root`` (stored bytes, as ``sif dupes --archives``
    reads them: each read once, a megabyte at a time, for its size and digest), by path
    inside it.

    When every member lies under one top directory (a release tarball,
    ``pkg-1.2/...``), the paths are taken under it. Raises
    :class:`ConfigError` when ``root`` is no zip or tar archive.
    """
    from sif.content import ContentOptions, entries

    out: dict[str, TreeFile] = {}
    prefix = root + "!/"
    for e in entries(root, options=ContentOptions(normalize="unpack"), on_warning=on_warning):
        if not e.path.startswith(prefix):
            continue
        h = blake3.blake3()
        n = 0
        with e.open() as stream:  # a chunk at a time: a member may be gigabytes
            while chunk := stream.read(CHUNK):
                h.update(chunk)
                n += len(chunk)
        rel = e.path[len(prefix) :]
        out[rel] = TreeFile(rel, e.path, n, 0, 0, h.digest(), False, root)
    if not out and not is_archive(root):
        raise ConfigError(f"{root}: not a directory (nor a zip or tar archive)")
    tops = {rel.split("/", 1)[0] for rel in out}
    if len(tops) == 1 and all("/" in rel for rel in out):  # a release: pkg-1.2/...
        cut = len(tops.pop()) + 1
        out = {rel[cut:]: f for rel, f in out.items()}
        for rel, f in out.items():
            f.rel = rel
    return out


def is_archive(path: str) -> bool:
    """Whether ``path`` is a zip or tar archive (compressed or not) that ``sif compare``
    compares by its members."""
    import stat
    import tarfile
    import zipfile

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a FIFO hung in open(); a device was read without end
        return zipfile.is_zipfile(path) or tarfile.is_tarfile(path)
    except OSError:
        return False


def _digest(f: TreeFile, on_warning: WarningSink) -> int:
    """Fill ``f.digest`` (BLAKE3 of the bytes, streamed); the bytes read.

    A file the index knows (``f.known``) takes the index's digest unless its
    first bytes are a compressed stream's; then 0 bytes are counted.
    """
    from sif.filetypes import sniff

    h = blake3.blake3()
    n = 0
    try:
        fh, _ = open_regular_file(f.path, expect=(f.dev, f.ino))
        with fh:
            if f.known is not None:
                head = fh.read(8)
                if sniff(head) not in ("gzip", "bzip2", "xz", "zstd"):
                    f.digest = f.known
                    return 0
                h.update(head)
                n = len(head)
            while chunk := fh.read(CHUNK):
                h.update(chunk)
                n += len(chunk)
    except OSError as exc:
        on_warning(ScanWarning(f.path, exc.strerror or str(exc)))
        f.unreadable = True
        return n
    f.digest = h.digest()
    return n


def _hash_all(
    files: Iterable[TreeFile], jobs: int, on_warning: WarningSink, stats: CompareStats
) -> None:
    todo = [f for f in files if f.digest is None and not f.unreadable]
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for f, n in zip(todo, pool.map(lambda f: _digest(f, on_warning), todo), strict=True):
            stats.bytes_hashed += n
            if f.known is not None and f.digest is f.known:
                stats.files_known += 1
            else:
                stats.files_hashed += 1


def _read(f: large.Listed, shown: str, on_warning: WarningSink) -> bytes | None:
    """The bytes of the file ``f`` (its path, identity and listed size; ``shown`` names it
    in a warning: a member's copy by the member), or ``None`` with a warning: unreadable,
    or not of its listed size (changed during the run: scores of other bytes than the
    listed ones; a file of size 0 that reads otherwise, as in ``/proc``, has no size of
    its content)."""
    try:
        fh, st = open_regular_file(f[0], expect=f[1])
        with fh:
            data = fh.read()
    except OSError as exc:
        on_warning(ScanWarning(shown, exc.strerror or str(exc)))
        return None
    if large.changed_since(f[2], st.st_size, len(data)):
        on_warning(ScanWarning(shown, str(large.Changed(shown, f[2], len(data)))))
        return None
    return data


def direction(a_in_b: float | None, b_in_a: float | None) -> str | None:
    """``a-in-b`` when A's file is held whole by B's and not the reverse (and so on)."""
    if a_in_b is None or b_in_a is None:
        return None
    if a_in_b >= CONTAINED > b_in_a:
        return "a-in-b"
    if b_in_a >= CONTAINED > a_in_b:
        return "b-in-a"
    return None


def name_similarity(a: str, b: str) -> tuple[float, float]:
    """How alike two relative paths are: their file names first, then the whole paths."""
    na, nb = os.path.basename(a), os.path.basename(b)
    base = 1.0 if na == nb else difflib.SequenceMatcher(None, na, nb).ratio()
    return base, difflib.SequenceMatcher(None, a, b).ratio()


def _pair_by_name(
    left_a: Sequence[str], left_b: Sequence[str]
) -> tuple[list[tuple[str, str, bool]], list[str], list[str]]:
    """One-to-one pairs of equally good candidates, the most alike names first.

    Returns the pairs (with whether the names chose: more than one candidate
    on either side) and what is left of each side.
    """
    tie = len(left_a) > 1 or len(left_b) > 1
    if len(left_a) * len(left_b) > NAME_PAIRS_LIMIT:
        by_name: dict[str, list[str]] = defaultdict(list)
        for b in sorted(left_b):
            by_name[os.path.basename(b)].append(b)
        pairs, rest_a = [], []
        for a in sorted(left_a):
            cands = by_name.get(os.path.basename(a))
            if cands:
                pairs.append((a, cands.pop(0), tie))
            else:
                rest_a.append(a)
        rest_b = sorted(b for bs in by_name.values() for b in bs)
        more = list(zip(rest_a, rest_b, strict=False))
        pairs += [(a, b, tie) for a, b in more]
        return pairs, rest_a[len(more) :], rest_b[len(more) :]
    scored = sorted(
        ((name_similarity(a, b), a, b) for a in left_a for b in left_b),
        key=lambda t: (-t[0][0], -t[0][1], t[1], t[2]),
    )
    used_a: set[str] = set()
    used_b: set[str] = set()
    pairs = []
    for _, a, b in scored:
        if a not in used_a and b not in used_b:
            used_a.add(a)
            used_b.add(b)
            pairs.append((a, b, tie))
    return pairs, [a for a in left_a if a not in used_a], [b for b in left_b if b not in used_b]


def _best_named(rel: str, candidates: Iterable[str]) -> str:
    return min(candidates, key=lambda c: (tuple(-x for x in name_similarity(rel, c)), c))


def compare_trees(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    index: str | os.PathLike[str] | None = None,
    *,
    threshold: float = 50.0,
    exact: bool = True,
    walk_options: WalkOptions | None = None,
    jobs: int | None = None,
    wait: bool = False,
    on_warning: WarningSink = ignore_warning,
) -> CompareResult:
    """Compare the trees ``a`` and ``b`` by content (see the module's docstring).

    ``index``: the index directory that fingerprints both trees for pass 3
    (default :func:`sif.default_index_path`; it is brought up to date only
    when files are left after pass 2, and a second run reads only what
    changed). ``threshold``: least max(C(A,B), C(B,A)), percent, for
    ``moved+changed``; ``exact`` (default): the containments are exact over
    all windows, else sampled estimates (``FileComparison.exact`` says which).
    ``a`` or ``b`` may be a zip or tar archive (``.tar.gz``...): it is compared
    by its members (:func:`list_archive`), read as ``sif dupes --archives``
    reads them, and queried whole in pass 3 (the index holds its members).
    Raises :class:`ConfigError` when ``a`` or ``b`` is neither a directory nor an archive, and
    what the index raises; an unreadable file is a warning (it is reported
    ``only-a``/``only-b`` unless its path matched: then ``changed`` with no score).
    """
    started = time.perf_counter()
    if not 0 <= threshold <= 100:
        raise ConfigError(f"threshold must be in 0..100, got {threshold}")
    ra, rb = os.path.abspath(os.fspath(a)), os.path.abspath(os.fspath(b))
    for name, root in (("A", ra), ("B", rb)):
        if not os.path.exists(root):
            raise ConfigError(f"{name} {root}: no such file or directory")
        if not os.path.isdir(root) and not is_archive(root):
            raise ConfigError(f"{name} {root}: not a directory (nor a zip or tar archive)")
    from sif.index import default_index_path
    from sif.index.build import skip_index_dir

    location = os.fspath(index) if index is not None else default_index_path()
    options = skip_index_dir(walk_options or WalkOptions(), location)
    options = WalkOptions(**{**options.__dict__, "empty": True})
    jobs = jobs or os.cpu_count() or 1
    stats = CompareStats()
    ta = list_tree(ra, options, on_warning) if os.path.isdir(ra) else list_archive(ra, on_warning)
    tb = list_tree(rb, options, on_warning) if os.path.isdir(rb) else list_archive(rb, on_warning)
    stats.files_a, stats.files_b = len(ta), len(tb)
    for tree in (ta, tb):  # what the index already knows is not read again (a second run)
        known_digests(tree, location)
    records: list[FileComparison] = []

    # Pass 1: same relative path.
    common = sorted(ta.keys() & tb.keys())
    _hash_all(
        (f for r in common if ta[r].size == tb[r].size for f in (ta[r], tb[r])),
        jobs,
        on_warning,
        stats,
    )
    changed = [r for r in common if ta[r].size != tb[r].size or ta[r].digest != tb[r].digest]
    with Members() as members:
        members.read(
            (
                (f.archive, f.path, f.size, _large(ta[r], tb[r]))
                for r in changed
                for f in (ta[r], tb[r])
                if f.archive is not None and not f.unreadable
            ),
            on_warning,
        )
        for rel in common:
            members.check()
            fa, fb = ta[rel], tb[rel]
            if fa.size == fb.size and fa.digest is not None and fa.digest == fb.digest:
                records.append(
                    FileComparison("same", 1, rel, rel, fa.size, fb.size, 100.0, 1.0, 1.0)
                )
                continue
            records.append(_changed(fa, fb, on_warning, stats, members))
    left_a = {r: f for r, f in ta.items() if r not in tb}
    left_b = {r: f for r, f in tb.items() if r not in ta}

    # Pass 2: exact content, grouped by size then digest with the whole other side.
    sizes_a: dict[int, list[TreeFile]] = defaultdict(list)
    sizes_b: dict[int, list[TreeFile]] = defaultdict(list)
    for f in ta.values():
        sizes_a[f.size].append(f)
    for f in tb.values():
        sizes_b[f.size].append(f)
    wanted_sizes = {f.size for f in left_a.values()} & sizes_b.keys()
    wanted_sizes |= {f.size for f in left_b.values()} & sizes_a.keys()
    _hash_all(
        (f for s in sorted(wanted_sizes) for f in (*sizes_a[s], *sizes_b[s])),
        jobs,
        on_warning,
        stats,
    )
    by_content_a: dict[tuple[int, bytes], list[str]] = defaultdict(list)
    by_content_b: dict[tuple[int, bytes], list[str]] = defaultdict(list)
    for s in wanted_sizes:
        for f in sizes_a[s]:
            if f.digest is not None:
                by_content_a[(s, f.digest)].append(f.rel)
        for f in sizes_b[s]:
            if f.digest is not None:
                by_content_b[(s, f.digest)].append(f.rel)
    for key in sorted(by_content_a.keys() & by_content_b.keys()):
        all_a, all_b = by_content_a[key], by_content_b[key]
        ga = sorted(r for r in all_a if r in left_a)
        gb = sorted(r for r in all_b if r in left_b)
        pairs, rest_a, rest_b = _pair_by_name(ga, gb)
        for x, y, tie in pairs:
            records.append(
                FileComparison("moved", 2, x, y, key[0], key[0], 100.0, 1.0, 1.0, by_name=tie)
            )
        for x in rest_a:
            y = _best_named(x, all_b)
            records.append(
                FileComparison(
                    "duplicate", 2, x, y, key[0], key[0], 100.0, 1.0, 1.0, by_name=len(all_b) > 1
                )
            )
        for y in rest_b:
            x = _best_named(y, all_a)
            records.append(
                FileComparison(
                    "duplicate", 2, x, y, key[0], key[0], 100.0, 1.0, 1.0, by_name=len(all_a) > 1
                )
            )
        for x, y, _ in pairs:
            del left_a[x], left_b[y]
        for x in rest_a:
            del left_a[x]
        for y in rest_b:
            del left_b[y]

    # Pass 3: fingerprints, through the index.
    if left_a or left_b:
        from sif.compare.similarity import candidate_pairs

        cands = candidate_pairs(
            ra,
            rb,
            {f.path: r for r, f in ta.items()},
            {f.path: r for r, f in tb.items()},
            _queries(ra, left_a),
            _queries(rb, left_b),
            location,
            threshold=threshold,
            exact=exact,
            options=options,
            jobs=jobs,
            wait=wait,
            on_warning=on_warning,
            stats=stats,
        )
        records += _pass3(cands, left_a, left_b, ta, tb)

    # Pass 4: what is left.
    for rel in sorted(left_a):
        records.append(FileComparison("only-a", 4, rel, None, left_a[rel].size, None))
    for rel in sorted(left_b):
        records.append(FileComparison("only-b", 4, None, rel, None, left_b[rel].size))
    records.sort(key=lambda r: (r.a if r.a is not None else r.b or "", r.b or ""))
    directories = rollup(records)
    stats.seconds = time.perf_counter() - started
    return CompareResult(ra, rb, tuple(records), directories, stats)


def _queries(root: str, left: dict[str, TreeFile]) -> list[str]:
    """The files to query for what is left of one side: an archive is queried whole."""
    if not left:
        return []
    return [root] if os.path.isfile(root) else [f.path for f in left.values()]


def _large(fa: TreeFile, fb: TreeFile) -> bool:
    """Whether two files at one path are scored a step at a time (:mod:`sif.compare.large`)."""
    return 8 * (fa.size + fb.size) > large.EXACT_BYTES


def _changed(
    fa: TreeFile,
    fb: TreeFile,
    on_warning: WarningSink,
    stats: CompareStats,
    members: Members,
) -> FileComparison:
    """Pass 1's ``changed``: the exact containments of two files at one path (a member
    of an archive in memory or in this run's copy of it: :mod:`sif.compare.members`)."""
    from sif.core.exactsets import containment, window_set

    unscored = FileComparison("changed", 1, fa.rel, fb.rel, fa.size, fb.size, exact=False)
    if fa.unreadable or fb.unreadable:  # named in a warning already: no score
        return unscored
    sides: list[bytes | large.Listed | None] = [
        members.get(f.path) if f.archive else (f.path, (f.dev, f.ino), f.size) for f in (fa, fb)
    ]
    sa, sb = sides
    if sa is None or sb is None:  # a member not read: warned when its archive was read
        return unscored
    shown = {s[0]: f.path for s, f in zip(sides, (fa, fb), strict=True) if isinstance(s, tuple)}
    if _large(fa, fb) and isinstance(sa, tuple) and isinstance(sb, tuple):
        try:  # a step at a time, on a window sample (sif.compare.large)
            ab, ba, exact = large.large_containments(sa, sb)
        except large.Changed as exc:
            on_warning(ScanWarning(shown.get(exc.path, exc.path), str(exc)))
            return unscored
        except OSError as exc:
            name = shown.get(exc.filename, exc.filename or fa.path)
            on_warning(ScanWarning(name, exc.strerror or str(exc)))
            return unscored
        stats.bytes_scored += fa.size + fb.size
        return FileComparison(
            "changed", 1, fa.rel, fb.rel, fa.size, fb.size, 100.0 * max(ab, ba), ab, ba,
            exact=exact, direction=direction(ab, ba),
        )  # fmt: skip
    da = sa if isinstance(sa, bytes) else _read(sa, fa.path, on_warning)
    db = None
    if da is not None:
        db = sb if isinstance(sb, bytes) else _read(sb, fb.path, on_warning)
    if da is None or db is None:
        return unscored
    stats.bytes_scored += len(da) + len(db)
    big = len(da) + len(db) >= 1 << 20
    ab, ba = containment(window_set(da, jit=big or None), window_set(db, jit=big or None))
    return FileComparison(
        "changed",
        1,
        fa.rel,
        fb.rel,
        fa.size,
        fb.size,
        100.0 * max(ab, ba),
        ab,
        ba,
        direction=direction(ab, ba),
    )


Candidate = tuple[str, str, float, float, bool]
"""A pair of pass 3: A's relative path, B's, C(A,B), C(B,A), whether they are exact."""


def _pass3(
    cands: list[Candidate],
    left_a: dict[str, TreeFile],
    left_b: dict[str, TreeFile],
    ta: dict[str, TreeFile],
    tb: dict[str, TreeFile],
) -> list[FileComparison]:
    """``moved+changed``: one to one among the files left over, then with matched ones."""
    out: list[FileComparison] = []

    def key(c: Candidate) -> tuple[float, float, float, str, str]:
        base, whole = name_similarity(c[0], c[1])
        return (-max(c[2], c[3]), -base, -whole, c[0], c[1])

    def record(c: Candidate, by_name: bool) -> FileComparison:
        x, y, ab, ba, ex = c
        return FileComparison(
            "moved+changed",
            3,
            x,
            y,
            ta[x].size,
            tb[y].size,
            100.0 * max(ab, ba),
            ab,
            ba,
            exact=ex,
            direction=direction(ab, ba),
            by_name=by_name,
        )

    def ties(pool: list[Candidate]) -> Counter[tuple[int, str, float]]:
        """How many candidates each file has at each score: more than one, the names chose."""
        n: Counter[tuple[int, str, float]] = Counter()
        for c in pool:
            n[(0, c[0], max(c[2], c[3]))] += 1
            n[(1, c[1], max(c[2], c[3]))] += 1
        return n

    def tied(c: Candidate, n: Counter[tuple[int, str, float]], side: int) -> bool:
        return n[(side, c[0] if side == 0 else c[1], max(c[2], c[3]))] > 1

    both = sorted((c for c in cands if c[0] in left_a and c[1] in left_b), key=key)
    n = ties(both)
    for c in both:
        if c[0] in left_a and c[1] in left_b:
            out.append(record(c, tied(c, n, 0) or tied(c, n, 1)))
            del left_a[c[0]], left_b[c[1]]
    rest = sorted((c for c in cands if c[0] in left_a or c[1] in left_b), key=key)
    n = ties(rest)
    for c in rest:
        if c[0] in left_a:
            out.append(record(c, tied(c, n, 0)))
            del left_a[c[0]]
        elif c[1] in left_b:
            out.append(record(c, tied(c, n, 1)))
            del left_b[c[1]]
    return out
