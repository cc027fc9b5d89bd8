"""All-against-all (Manber, section 4): every group of similar files under some trees.

The pipeline, each stage feeding the next:

1. **Fingerprints through the index.** :func:`sif.index.build_index` brings
   the index up to date with the trees (a second run reads only changed
   files); the files in scope are the indexed files under the roots.
2. **Collation** (:data:`COLLATE_SQL`, one DuckDB statement). As the paper
   does it: fingerprints held by more than one file become *sets of files*
   (Figure 1); identical sets are collapsed into one with a *counter*
   (Figure 2); each set then adds its counter to every pair of its files.
   Only files of the same kind (text, binary, and content view once the
   index records one) are ever paired. A fingerprint held by more than
   ``max_df`` files is a *stop-fingerprint* (PostScript prologs, licence
   texts, generated boilerplate, section 2): it creates no pairs. The
   statement reads a relation ``fp(fp, file_id, grp)`` and is exact on any
   subset of rows that holds *all* rows of its fingerprints, so it runs as
   well on one hash partition of the rows (the top bits of the value, as
   the index's segments bucket them); partial pair counts add up
   (:func:`collate`). DuckDB works out of core under ``memory_limit``.
3. **Pair counts kept.** The collated counts go into the index
   (``similar_runs``, ``similar_pairs``, keyed by the index generation, the
   roots and ``max_df``), so that a new threshold or filter is the paper's
   "one more second" of post-processing with no file opened; any change to
   the index changes its generation and invalidates them. A digest of the
   stat walk the index matched is stored with them: a re-threshold walks
   (stat only), and when the digest and the generation are unchanged it
   skips the index update, opens the catalog once, read-only, and scores
   the stored counts (:func:`_reuse_unchanged`; 1 GB, 38k files: ~0.5 s in
   the library); any touched file sends it down the full path.
4. **Scores and filters** (vectorised over all pairs): the sampled
   estimates of containment both ways, Jaccard, the paper's multiplicity
   percentage; then ``min_shared``, ``size_ratio``, ``same_suffix``. The
   score compared with the threshold is max(C(A,B), C(B,A)), how much of the
   smaller file the larger holds, **exact by default**: every pair whose
   sampled score could reach the threshold (its 97.7% upper bound,
   :func:`sif.core.evidence.score_bounds`) is read and scored over all
   ``w``-byte windows of both files (:mod:`sif.similar.exact`), and the
   exact scores are stored with the counts. ``exact=False`` (``--fast``)
   compares the estimate, believed only with enough evidence (2 shared
   fingerprints and its 90% lower bound at half the threshold). Pairs of
   small files (both under :data:`SMALL_EXACT_BYTES`) are scored exactly at
   collation in every run, ``--fast`` too (:func:`_exact_small`). An exact
   score, once known, decides in place of the estimate; a pair whose file
   changed since it was indexed keeps its estimate, marked.
5. **Groups** (the paper's first version): each file is a reference with the
   files similar to it; each distinct set is reported once. Or **interesting
   sets** (the second version): maximal cliques or connected components
   (:func:`similar_sets`).

Estimates, not counts of substrings: the containment is the share of the
smaller file's *distinct* fingerprints that the other holds, when both files
were sampled alike. A small file is sampled more densely (the index's
small-file tier, at least 20 fingerprints a file): then the shared
fingerprints count the shared windows at the sparser file's rate, and the
estimate is scaled by it (:func:`pair_estimates`). Stop-fingerprints stay in
the denominators, so boilerplate shared by a pair lowers its estimate
slightly rather than making unrelated files look alike.

The package, one job a module: :mod:`~sif.similar.model` (the values),
:mod:`~sif.similar.collate` (the SQL of section 4), :mod:`~sif.similar.estimate`,
:mod:`~sif.similar.exact` (window sets, the exact pass, identical tiny files),
:mod:`~sif.similar.score` (filters and threshold), :mod:`~sif.similar.sets`
(groups and interesting sets) and :mod:`~sif.similar.run` (the driver).
"""

from __future__ import annotations

from sif.core.evidence import FAST_LOWER_SHARE, FAST_MIN_SHARED
from sif.index.pairs import PAIR_COLUMNS
from sif.similar.collate import COLLATE_SQL, OOM_PARTITION_STEP, STOPPED_SQL, collate
from sif.similar.estimate import (
    CANDIDATE_Z,
    INTERVAL_Z,
    pair_estimates,
    poisson_bounds,
    sampling_tier,
    score_bounds,
)
from sif.similar.exact import (
    EXACT_CACHE_BYTES,
    EXACT_CHUNKS_PER_JOB,
    SMALL_EXACT_BYTES,
    SMALL_EXACT_FLOOR,
    _chunk_bounds,
    exact_containment,
    window_set,
)
from sif.similar.model import (
    DEFAULT_MAX_DF,
    DEFAULT_MIN_SHARED,
    SETS,
    GroupMember,
    SimilarFile,
    SimilarGroup,
    SimilarOptions,
    SimilarPair,
    SimilarResult,
    SimilarSet,
    SimilarStats,
)
from sif.similar.run import (
    DEFAULT_MEMORY_LIMIT,
    RULES_VERSION,
    find_similar,
)
from sif.similar.score import pending_exact
from sif.similar.sets import CLIQUE_BUDGET, similar_groups, similar_sets

__all__ = [
    "CANDIDATE_Z",
    "CLIQUE_BUDGET",
    "COLLATE_SQL",
    "DEFAULT_MAX_DF",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_MIN_SHARED",
    "EXACT_CACHE_BYTES",
    "EXACT_CHUNKS_PER_JOB",
    "FAST_LOWER_SHARE",
    "FAST_MIN_SHARED",
    "INTERVAL_Z",
    "OOM_PARTITION_STEP",
    "PAIR_COLUMNS",
    "RULES_VERSION",
    "SETS",
    "SMALL_EXACT_BYTES",
    "SMALL_EXACT_FLOOR",
    "STOPPED_SQL",
    "GroupMember",
    "SimilarFile",
    "SimilarGroup",
    "SimilarOptions",
    "SimilarPair",
    "SimilarResult",
    "SimilarSet",
    "SimilarStats",
    "_chunk_bounds",
    "collate",
    "exact_containment",
    "find_similar",
    "pair_estimates",
    "pending_exact",
    "poisson_bounds",
    "sampling_tier",
    "score_bounds",
    "similar_groups",
    "similar_sets",
    "window_set",
]
