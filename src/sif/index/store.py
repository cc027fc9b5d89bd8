"""The index behind two small protocols, their value types, and the factories.

- :class:`IndexStore` is the writer's view: what is indexed, and an atomic
  commit of files added and files dropped. One writer at a time.
- :class:`IndexReader` is the reader's view: fingerprint lookups and file
  descriptions from the last committed state, never blocked by a writer.

:func:`open_store` and :func:`open_reader` give the on-disk implementation
(:mod:`sif.index.duck`, :mod:`sif.index.reader`); :class:`sif.index.memory.MemoryIndex`
is an in-memory double of both, for tests of the logic above them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from sif.core.anchors import AnchorSet
from sif.errors import ConfigError
from sif.fingerprint import FingerprintParams
from sif.index.scan import ScannedFile
from sif.pathkeys import path_keys

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

ENV_VAR = "SIF_INDEX"
"""Environment variable naming the index directory (``--index`` wins over it)."""


def default_index_path() -> str:
    """``$SIF_INDEX`` if set, else ``<user cache dir>/sif/index`` (platformdirs)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return env
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("sif"), "index")


#: Normalisation of an index made before content views (schema 1): every file raw.
LEGACY_NORMALIZE = "raw"


@dataclass(frozen=True)
class ParamSet:
    """What the fingerprints of one part of the index were made with.

    ``params``: the fingerprint parameters; ``normalize``: the content
    normalisation mode (:data:`sif.content.NORMALIZE_MODES`) that turned
    files into entries. Two sets differ when either differs, and the index
    never compares fingerprints across sets. Raises :class:`ConfigError` for
    an unknown mode.
    """

    params: FingerprintParams
    normalize: str = "auto"

    def __post_init__(self) -> None:
        from sif.content import NORMALIZE_MODES

        if self.normalize not in NORMALIZE_MODES:
            raise ConfigError(f"unknown normalisation {self.normalize!r}")

    def __str__(self) -> str:
        return f"{describe_params(self.params)} normalize={self.normalize}"


def describe_params(p: FingerprintParams) -> str:
    """Fingerprint parameters in the words of the options that make them.

    ``winnow w=50 k=8 min-fingerprints=20``; ``sif94 w=50 k=8``; ``anchors
    w=50 set=1a2b3c4d5e6f``; values that no option sets (``modulus_bits``,
    ``max_period``) only when they differ from the defaults.
    """
    from sif.fingerprint import FingerprintParams as _FP

    default = _FP(scheme=p.scheme, anchors_digest=p.anchors_digest)
    words = [p.scheme, f"w={p.window}"]
    if p.scheme == "winnow":
        ww = int(p.winnow_window or 0)
        k = (ww + 1).bit_length() - 2
        words.append(f"k={k}" if ww > 0 and (ww + 1) == 1 << (k + 1) else f"W={ww}")
    elif p.scheme == "sif94":
        words.append(f"k={p.k}")
        if p.modulus_bits != default.modulus_bits:
            words.append(f"M=2^{p.modulus_bits}")
    else:
        words.append(f"set={(p.anchors_digest or '')[:12]}")
    if p.scheme != "anchors":
        words.append(f"min-fingerprints={p.min_fingerprints}")
    if p.max_period != default.max_period:
        words.append(f"max-period={p.max_period}")
    return " ".join(words)


def param_set(p: FingerprintParams | ParamSet) -> ParamSet:
    """``p`` as a :class:`ParamSet` (bare fingerprint parameters: ``normalize="auto"``)."""
    return p if isinstance(p, ParamSet) else ParamSet(p)


@dataclass(frozen=True)
class KnownFile:
    """What the index remembers of a file on disk to tell whether it changed.

    ``ids``: its entries (one for a plain file, one per member of an
    archive); ``size``: the file's size on disk.
    """

    ids: tuple[int, ...]
    dev: int
    ino: int
    size: int
    mtime_ns: int


def origin_keys(origins: Iterable[bytes], n: int, secret: bytes) -> tuple[U64, U64]:
    """The :func:`sif.pathkeys.path_key` under ``secret`` of ``n`` origins (their paths
    as the file system spells them) as two columns: the first halves (sorted and
    searched) and the second (compared where the first meet). The catalog keeps them with
    each entry, and the walk computes those of the paths it meets: the two meet without a
    Python string a file."""
    keys = path_keys(origins, n, secret)
    return np.ascontiguousarray(keys[:, 0]), np.ascontiguousarray(keys[:, 1])


@dataclass(frozen=True)
class KnownColumns:
    """Every live entry of a parameter set, one row per entry, as columns, in no order.

    ``keys[i]`` and ``checks[i]`` are the two halves of the key
    of the path on disk of the file that holds entry ``ids[i]`` (:func:`origin_keys`),
    and ``origins(rows)`` gives those paths for some
    rows (the store reads them then: at a million files, a string a row and
    a dict of them were 71 MB of an incremental run's peak); ``dev``, ``ino``, ``size`` (the
    file's size on disk), ``mtime_ns`` and ``ctime_ns`` are that file's, so
    all rows of one origin agree on them. What ``sif index`` compares a walk
    with, without a Python object per file. ``ctime_ns``: ``None`` when the
    store keeps none (then it is not compared); a row whose ctime is unknown
    (indexed before it was kept) holds a value no file has, so the file is
    read again once.
    """

    keys: U64
    checks: U64
    ids: U32
    dev: U64
    ino: U64
    size: I64
    mtime_ns: I64
    ctime_ns: I64 | None = None
    origins: Callable[[npt.NDArray[np.int64]], list[str]] = field(
        default=lambda rows: [], repr=False
    )
    """The origins of the rows ``rows`` (positions in these columns), in that order."""
    origins_under: (
        Callable[[npt.NDArray[np.int64], Sequence[str]], tuple[npt.NDArray[np.int64], list[str]]]
        | None
    ) = field(default=None, repr=False)
    """The rows among ``rows`` whose origin is one of ``roots`` or lies under one, and
    their origins, the store choosing them (the rows a run did not meet are every other
    root's entries: 400k paths read to keep a few); ``None``: :attr:`origins` and a test
    of each here."""
    secret: bytes = field(default=b"", repr=False)
    """The secret :attr:`keys` and :attr:`checks` are under (the store's)."""

    @classmethod
    def empty(cls) -> KnownColumns:
        i64 = np.empty(0, np.int64)
        u64 = np.empty(0, np.uint64)
        return cls(u64, u64, np.empty(0, np.uint32), u64, u64, i64, i64)

    def by_origin(self) -> dict[str, KnownFile]:
        """The rows grouped by origin, entry ids ascending. Cost: a Python loop over rows."""
        order = np.argsort(self.ids, kind="stable")
        ids, dev, ino = self.ids[order].tolist(), self.dev[order].tolist(), self.ino[order].tolist()
        size, mtime = self.size[order].tolist(), self.mtime_ns[order].tolist()
        origins = self.origins(order.astype(np.int64))
        out: dict[str, KnownFile] = {}
        for j, origin in enumerate(origins):
            k = out.get(origin)
            if k is None:
                out[origin] = KnownFile((ids[j],), dev[j], ino[j], size[j], mtime[j])
            else:
                out[origin] = KnownFile((*k.ids, ids[j]), k.dev, k.ino, k.size, k.mtime_ns)
        return out


@dataclass(frozen=True)
class NewFile:
    """An entry read by ``sif index``, ready to be committed.

    ``path`` is the entry's path (``a.zip!/x.txt`` for a member); ``origin``
    the file on disk that holds it (default: ``path``) and ``file_size`` that
    file's size when it was read (default: the bytes of the entry), which
    the next run compares with the disk to tell whether it changed.
    """

    path: str
    dev: int
    ino: int
    mtime_ns: int
    scan: ScannedFile
    origin: str | None = None
    file_size: int | None = None
    ctime_ns: int | None = None
    """The file's ``st_ctime_ns`` when the walk saw it (``None``: unknown, read again)."""

    @property
    def disk_path(self) -> str:
        return self.origin if self.origin is not None else self.path

    @property
    def disk_size(self) -> int:
        return self.file_size if self.file_size is not None else self.scan.size


@dataclass(frozen=True)
class IndexedFile:
    """A file as the index holds it."""

    id: int
    path: str
    size: int
    kind: str
    digest: bytes
    n_fp: int
    n_distinct: int
    dev: int
    ino: int
    mtime_ns: int
    view: str = "raw"
    member: str = ""
    """The part of ``path`` inside the file on disk (``!/x.txt``), ``""`` for a whole file."""


@dataclass(frozen=True)
class FileStats:
    """Per-file figures of many indexed files at once, as arrays in the order of ``ids``.

    ``found`` says which ids are live files of the set; the other arrays
    hold 0 where it is false. ``kind`` and ``view`` are codes
    (:func:`kind_code`, :func:`view_code`).
    """

    ids: U32
    found: npt.NDArray[np.bool_]
    n_fp: I64
    n_distinct: I64
    size: I64
    kind: I64
    view: I64


class IndexReader(Protocol):
    """Reads the last committed state of an index."""

    def parameter_sets(self) -> list[ParamSet]:
        """The parameter sets the index holds fingerprints for, most recent first."""
        ...

    def anchors(self, params: FingerprintParams | ParamSet) -> AnchorSet | None:
        """The anchor set stored with ``params`` (scheme ``anchors``), else ``None``."""
        ...

    def lookup(self, params: FingerprintParams | ParamSet, query: U32) -> tuple[I64, U32]:
        """Rows under ``params`` whose value is in ``query`` (sorted, unique 32-bit values).

        Returns (position in ``query``, file id), one pair per matching row of
        a live file: a value a file holds twice appears twice.
        """
        ...

    def describe(self, params: FingerprintParams | ParamSet, ids: U32) -> dict[int, IndexedFile]:
        """The live files among ``ids``."""
        ...

    def file_stats(self, params: FingerprintParams | ParamSet, ids: U32) -> FileStats:
        """Sizes, fingerprint counts, kinds and views of ``ids``, vectorised (for scoring)."""
        ...

    def same_content(self, params: FingerprintParams | ParamSet, size: int, digest: bytes) -> U32:
        """The live entries under ``params`` of ``size`` bytes with this content digest.

        For a query without fingerprints (under the window's length): its exact copies.
        """
        ...

    def close(self) -> None: ...


class IndexStore(Protocol):
    """The writer's side: exclusive while open."""

    @property
    def path_secret(self) -> bytes:
        """The secret of the store's path keys (:mod:`sif.pathkeys`)."""
        ...

    def known_files(self, params: FingerprintParams | ParamSet) -> dict[str, KnownFile]:
        """Every file on disk with live entries under ``params``, by its path on disk."""
        ...

    def known_columns(self, params: FingerprintParams | ParamSet) -> KnownColumns:
        """The same as :meth:`known_files`, one row per entry, as columns (no grouping)."""
        ...

    def commit(
        self,
        params: FingerprintParams | ParamSet,
        anchors: AnchorSet | None,
        added: Sequence[NewFile],
        dropped: Sequence[int],
    ) -> None:
        """Add ``added`` and drop the files with ids ``dropped``, atomically and durably.

        After it returns, readers see the new state; a crash before leaves
        the previous one.
        """
        ...

    def finish(
        self, params: FingerprintParams | ParamSet, roots: Sequence[str] | None = None
    ) -> None:
        """End of a run: tidy storage (compaction) without changing the content.

        A store opened with ``rebuild`` makes its new content the index here
        (until then readers see the old one); closed before, it is discarded.
        ``roots``: the run's roots, recorded as the set's last run (``sif index --info``).
        """
        ...

    def verify(self) -> int:
        """Compare the stored fingerprints with their checksums; returns the parts checked.

        Raises :class:`sif.errors.IndexCorrupt` naming the first damaged file.
        """
        ...

    def close(self) -> None: ...


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    wait: bool = False,
    rebuild: bool = False,
    cancel: threading.Event | None = None,
) -> IndexStore:
    """Open the index at ``path`` (default :func:`default_index_path`) for writing.

    Creates it if missing; an existing directory must be empty or a sif
    index (it carries the marker :data:`sif.index.indexdir.MARKER`), else
    :class:`sif.errors.IndexUnusable` naming it. ``wait`` blocks while
    another process writes it; otherwise that raises
    :class:`sif.errors.IndexInUse` naming its pid. ``rebuild`` builds a new
    index beside the old one, which readers see until
    :meth:`IndexStore.finish` swaps the new one in (the cure for a corrupt
    index); only sif's own files are ever deleted. Raises
    :class:`sif.errors.IndexCorrupt` for a file that is not a readable sif
    index, :class:`sif.errors.IndexUnusable` when the directory cannot be
    created or written (permission denied, no space left). ``cancel``: an event that,
    set, gives up a ``wait`` (:class:`sif.index.indexdir.Cancelled`).
    """
    from sif.index.duck import DuckStore

    return DuckStore(
        os.fspath(path or default_index_path()), wait=wait, rebuild=rebuild, cancel=cancel
    )


def open_reader(path: str | os.PathLike[str] | None = None) -> IndexReader:
    """Open the last committed state of the index at ``path`` for reading.

    Never waits for a writer and never opens the catalog. Raises
    :class:`sif.errors.IndexUnusable` when there is no index yet and
    :class:`sif.errors.IndexCorrupt` when it is unreadable. Cost: a few
    small reads and memory maps.
    """
    from sif.index.reader import SnapshotReader

    return SnapshotReader(os.fspath(path or default_index_path()))


def kind_code(kind: str) -> int:
    from sif.content import KINDS

    return KINDS.index(kind)


def kind_name(code: int) -> str:
    from sif.content import KINDS

    return KINDS[code]


def view_code(view: str) -> int:
    from sif.content import VIEW_NAMES

    return VIEW_NAMES.index(view)


def view_name(code: int) -> str:
    from sif.content import VIEW_NAMES

    return VIEW_NAMES[code]
