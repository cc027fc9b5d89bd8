"""The values of ``sif compare``: one record per file, one per directory, the summary."""

from __future__ import annotations

from dataclasses import dataclass, field

from sif.index.build import IndexStats

#: Every status a file can get, in the order of the passes that give them.
STATUSES = ("same", "changed", "moved", "duplicate", "moved+changed", "only-a", "only-b")
#: Which pass gives each status (``duplicate``: pass 2, content found on the other side
#: under a name already matched; ``moved+changed`` also for a file held by one already
#: matched, such as a file appended to another).
PASS_OF = {
    "same": 1,
    "changed": 1,
    "moved": 2,
    "duplicate": 2,
    "moved+changed": 3,
    "only-a": 4,
    "only-b": 4,
}
PASS_NAMES = {1: "same path", 2: "exact content", 3: "fingerprints", 4: "left over"}
#: A containment at least this high, with the other one below it, gives a direction
#: (``a-in-b``: A's file is held whole by B's, as a file appended to another).
CONTAINED = 0.99


@dataclass(frozen=True)
class FileComparison:
    """One file of A, of B, or one of each, and what the passes found.

    ``a``/``b``: paths relative to the roots (``None`` for the side that has
    none); ``status`` one of :data:`STATUSES`; ``pass_no`` the pass that
    decided it (1 same path, 2 exact content, 3 fingerprints, 4 left over);
    ``score`` max(C(A,B), C(B,A)) in percent, ``a_in_b``/``b_in_a`` the
    containments as fractions (``None`` where not scored: ``same``, ``moved``
    are 100, ``only-*`` have none); ``exact`` whether they are exact over all
    50-byte windows (else sampled estimates: ``--fast``, or two large files at one
    path, :mod:`sif.compare.large`); ``direction``
    ``a-in-b`` or ``b-in-a`` when one file is held whole by the other;
    ``by_name``: several candidates had the same score and the names chose.
    """

    status: str
    pass_no: int
    a: str | None
    b: str | None
    size_a: int | None
    size_b: int | None
    score: float | None = None
    a_in_b: float | None = None
    b_in_a: float | None = None
    exact: bool = True
    direction: str | None = None
    by_name: bool = False

    @property
    def share_a(self) -> float:
        """The share of A's file present in B (1 for identical content)."""
        if self.a is None or self.b is None:
            return 0.0
        if self.status in ("same", "moved", "duplicate"):
            return 1.0
        return self.a_in_b or 0.0

    @property
    def share_b(self) -> float:
        """The share of B's file present in A."""
        if self.a is None or self.b is None:
            return 0.0
        if self.status in ("same", "moved", "duplicate"):
            return 1.0
        return self.b_in_a or 0.0


@dataclass(frozen=True)
class DirectoryShare:
    """A directory of one side (``side`` ``a`` or ``b``; ``path`` relative, ``.`` the root)
    and how much of it the other side holds.

    ``bytes``: the size of its files (recursively); ``present``: the bytes of
    them found on the other side, identical or similar, each file weighted by
    its containment; ``other``: the other side's deepest directory that holds
    over half of ``present`` (``None`` when nothing is present).
    """

    side: str
    path: str
    files: int
    bytes: int
    present: float
    other: str | None

    @property
    def share(self) -> float:
        return self.present / self.bytes if self.bytes else 1.0


@dataclass
class CompareStats:
    """What a run did, for the summary."""

    files_a: int = 0
    files_b: int = 0
    bytes_hashed: int = 0
    files_hashed: int = 0
    files_known: int = 0
    """Files whose digest came from the index (unchanged since it was built)."""
    bytes_scored: int = 0
    queried: int = 0
    index: IndexStats | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class CompareResult:
    """Every file of A and B (sorted by A's path, then B's), the roll-up and the figures."""

    a: str
    b: str
    files: tuple[FileComparison, ...]
    directories: tuple[DirectoryShare, ...]
    stats: CompareStats = field(compare=False)

    @property
    def identical(self) -> bool:
        """A and B hold the same content under the same names (``diff``'s exit status 0)."""
        return all(f.status == "same" for f in self.files)

    def summary(self) -> dict[str, dict[str, int]]:
        """Files and bytes by status: ``{"same": {"files": n, "bytes": m}, ...}``.

        Bytes are A's for every status but ``only-b`` (B's); a ``duplicate`` of
        B's side counts B's.
        """
        out = {s: {"files": 0, "bytes": 0} for s in STATUSES}
        for f in self.files:
            out[f.status]["files"] += 1
            size = f.size_a if f.size_a is not None else f.size_b
            out[f.status]["bytes"] += size or 0
        return out
