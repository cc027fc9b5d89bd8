"""The values of ``sif similar``: options, files, pairs, groups, sets, figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError
from sif.index.build import IndexStats

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

SETS = ("cliques", "components")
#: Default stop-fingerprint cap: a fingerprint in more than this many files creates no
#: pairs. Measured (bench/similar.py): in 23 sdists of six packages (2,456 files), the
#: most frequent fingerprint is in 37 files (chardet modules vendored in each requests
#: release: a real version history, to keep); in /usr/share/doc (4,461 files), the 12
#: fingerprints in more than 100 files are all copyright and licence texts and generated
#: HTML (the most frequent in 257 files).
DEFAULT_MAX_DF = 100
#: Default least number of distinct shared fingerprints. The paper (section 6) wants 5-10
#: for strong evidence, but a small file held by a large one shares only the large
#: file's sparse fingerprints (one per 256 bytes: 3-4 in 1 KB), and the threshold on
#: the containment already asks for T * n of them. Measured on 23 sdists with the
#: small-file tier (bench/similar.py): 1 gives F1 0.936 and small-file recall 0.88 at
#: T = 25%, 2 gives 0.940 and 0.85, 3 gives 0.934 and 0.83. A chance hit of 32-bit
#: values costs a small file about n * (distinct values) / 2^32 (0.3% at 4 M values).
DEFAULT_MIN_SHARED = 1


# --- value types ------------------------------------------------------------------


@dataclass(frozen=True)
class SimilarOptions:
    """What ``sif similar`` looks for. Raises :class:`ConfigError` for a bad value.

    - ``threshold``: least score, in percent (the paper's T, default 25);
    - ``max_df``: stop-fingerprint cap (more files than this: no pairs);
    - ``min_shared``: least number of distinct shared fingerprints;
    - ``size_ratio``: skip pairs whose sizes differ more than this many times;
    - ``same_suffix``: pair only files with the same suffix (``.c``, ``.py``);
    - ``exact``: the score compared with the threshold is the exact
      containment over all windows (the default: candidates come from the
      fingerprints, at a sampled upper bound, then both files are read);
      ``False`` (``--fast``) keeps the sampled estimate, with its interval;
    - ``sets``: ``None`` for the paper's groups, ``"cliques"`` or ``"components"``.
    """

    threshold: float = 25.0
    max_df: int = DEFAULT_MAX_DF
    min_shared: int = DEFAULT_MIN_SHARED
    size_ratio: float | None = None
    same_suffix: bool = False
    exact: bool = True
    sets: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 100:
            raise ConfigError(f"threshold must be in 0..100, got {self.threshold}")
        if self.max_df < 2:
            raise ConfigError(f"--max-df must be at least 2, got {self.max_df}")
        if self.min_shared < 1:
            raise ConfigError(f"--min-shared must be at least 1, got {self.min_shared}")
        if self.size_ratio is not None and self.size_ratio < 1:
            raise ConfigError(f"--size-ratio must be at least 1, got {self.size_ratio}")
        if self.sets is not None and self.sets not in SETS:
            raise ConfigError(f"unknown --sets {self.sets!r} (choose from {', '.join(SETS)})")


@dataclass(frozen=True)
class SimilarFile:
    """A file of the scope, as the index holds it."""

    id: int
    path: str
    size: int
    kind: str
    n_fp: int
    n_distinct: int
    digest: bytes


@dataclass(frozen=True)
class SimilarPair:
    """Two similar files (``a`` before ``b`` by path). Shares are fractions in [0, 1].

    ``a_in_b``/``b_in_a``: the estimated containment (:func:`pair_estimates`:
    shared distinct fingerprints over each file's distinct fingerprints, scaled
    to the sparser file's density when a small file was sampled more densely);
    ``jaccard`` the estimated resemblance; ``percent_a_in_b``/``percent_b_in_a``: the paper's
    percentage, the rows of the other file holding the shared fingerprints
    over the file's fingerprints (multiplicity: it can exceed 100);
    ``exact_a_in_b``/``exact_b_in_a``: C(A,B) and C(B,A) over all windows
    when known (the default; under ``--fast`` for a pair of small files:
    :func:`_exact_small`), else ``None``: then :attr:`score` is the estimate
    and ``score_low``/``score_high`` its 90% interval, in percent
    (:func:`sif.similar.estimate.score_bounds`).
    """

    a: SimilarFile
    b: SimilarFile
    shared: int
    a_in_b: float
    b_in_a: float
    jaccard: float
    percent_a_in_b: float
    percent_b_in_a: float
    exact_a_in_b: float | None = None
    exact_b_in_a: float | None = None
    score_low: float | None = None
    score_high: float | None = None

    @property
    def exact(self) -> bool:
        """Whether :attr:`score` is the exact containment (else the sampled estimate)."""
        return self.exact_a_in_b is not None and self.exact_b_in_a is not None

    @property
    def score(self) -> float:
        """max(C(A,B), C(B,A)) in percent: exact when known, else the estimate."""
        if self.exact_a_in_b is not None and self.exact_b_in_a is not None:
            return 100.0 * max(self.exact_a_in_b, self.exact_b_in_a)
        return 100.0 * max(self.a_in_b, self.b_in_a)

    @property
    def identical(self) -> bool:
        """Same size and BLAKE3 digest: exact copies."""
        return self.a.size == self.b.size and self.a.digest == self.b.digest

    def other(self, f: SimilarFile) -> SimilarFile:
        return self.b if f.id == self.a.id else self.a

    def percent_for(self, f: SimilarFile) -> float:
        """The paper's percentage shown beside ``f``'s partner in ``f``'s group.

        It is taken in the direction of the score: the share of the
        fingerprints of the file more contained in the other (the smaller).
        """
        if self.a_in_b >= self.b_in_a:
            return self.percent_a_in_b
        return self.percent_b_in_a


@dataclass(frozen=True)
class GroupMember:
    """A file similar to a group's reference, with the figures shown beside it."""

    file: SimilarFile
    percent: float
    score: float
    identical: bool
    exact: bool = True
    """Whether ``score`` is exact; else an estimate within ``pair.score_low``..``score_high``."""
    pair: SimilarPair | None = None


@dataclass(frozen=True)
class SimilarGroup:
    """A reference file (``R`` in Figure 3) and the files similar to it, best first."""

    reference: SimilarFile
    members: tuple[GroupMember, ...]


@dataclass(frozen=True)
class SimilarSet:
    """An interesting set: a clique or component, with each file's least pairwise score."""

    files: tuple[SimilarFile, ...]
    least: tuple[float, ...]


@dataclass
class SimilarStats:
    """What a run did, for the summary."""

    files: int = 0
    fingerprints: int = 0
    stopped: int = 0
    pairs_collated: int = 0
    pairs: int = 0
    reused: bool = False
    exact_pairs: int = 0
    sampled_pairs: int = 0
    """... of which scored on a sample of their windows (large files: ``exactsets.SAMPLE_FROM``)."""
    exact_files_read: int = 0
    exact_bytes_read: int = 0
    exact_changed: int = 0
    small_files: int = 0
    """Small files looked for in all others (:mod:`sif.similar.smallpass`)..."""
    small_files_read: int = 0
    small_bytes_read: int = 0
    small_candidates: int = 0
    """... and the pairs that pass found, which no shared fingerprint gave."""
    estimated: int = 0
    sampled: int = 0
    """... of which taken on a window sample (large files), with a binomial interval."""
    index: IndexStats | None = None
    seconds_index: float = 0.0
    seconds_collate: float = 0.0
    seconds_exact: float = 0.0
    seconds_small: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class SimilarResult:
    """Pairs above the threshold (best first), the groups or sets, and the figures.

    ``pairs`` and ``groups`` are sequences whose values are made when read
    (:mod:`sif.similar.table`: a run keeps columns, not one object a pair);
    they compare equal to tuples of the same values.
    """

    options: SimilarOptions
    pairs: Sequence[SimilarPair]
    groups: Sequence[SimilarGroup]
    sets: tuple[SimilarSet, ...]
    stats: SimilarStats = field(compare=False)
