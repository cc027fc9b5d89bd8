"""Window sets of indexed entries, read again from disk and checked against the index.

The exact score (``sif similar`` by default, ``sif query``) compares S(A)
and S(B), the distinct 50-byte windows of two entries
(:mod:`sif.core.exactsets`). They are made from the same content the
fingerprints were: the file as it is, or its member, decompressed content
or normalised view. Content whose BLAKE3 digest is not the indexed one
changed since it was indexed: it gives no set, and its pairs keep their
estimate (marked as such). A file that cannot be read is a warning.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import blake3
import numpy as np
import numpy.typing as npt

from sif.core import exactsets as _sets
from sif.events import ScanWarning, WarningSink
from sif.fileio import open_regular_file

I64 = npt.NDArray[np.int64]
Src = tuple[str, str, str]
"""An entry's path, the path of the file on disk holding it, and its view's label."""


class WindowSets:
    """Window sets of indexed entries, read again from disk, each once if it can be.

    A window set is made of the same content the entry's fingerprints were:
    :func:`sif.content.entries` with the index's normalisation gives it again
    (a plain file as it is; a member, a decompressed file or a normalised
    view as indexed), every wanted entry of one file at once, so that an
    archive is opened once. Content whose BLAKE3 digest is not the indexed
    one (the file changed since) gives no set: its pairs keep their
    estimate. A file that cannot be read is a warning. A set is dropped after
    its last pair (:meth:`release`); beyond ``budget`` bytes the least
    recently used go first, and are read again if needed, unless the caller
    says when each set is next needed (``next_use`` of :meth:`get`): then the
    one needed last goes first (Belady's rule), so that a budget smaller than
    a chunk's sets costs few reads again.

    ``make``: what to keep of each checked content instead of its window set
    (an array: anything with ``nbytes``), as the small-file pass keeps which
    small files' windows a file holds (:mod:`sif.similar.smallpass`).
    ``sizes``: check content by its indexed size alone, not its digest
    (``digests`` unused): for a pass that only picks candidates, which are
    checked byte for byte when scored. ``shifts``: by id, the window sample a
    set keeps (:func:`sif.core.exactsets.in_sample`; absent: every window).
    """

    def __init__(
        self,
        window: int,
        budget: int,
        normalize: str,
        digests: dict[int, bytes],
        on_warning: WarningSink,
        jit: bool = True,
        make: Callable[[bytes], Any] | None = None,
        sizes: dict[int, int] | None = None,
        shifts: dict[int, int] | None = None,
    ) -> None:
        self.window = window
        self.make = make
        self.sizes = sizes
        self.shifts = shifts or {}
        self.jit = jit
        self.budget = budget
        self.normalize = normalize
        self.digests = digests
        self.on_warning = on_warning
        self.cache: OrderedDict[int, Any] = OrderedDict()
        self.held = 0
        self.files_read = 0
        self.bytes_read = 0
        self.changed = 0
        self.wanted: dict[str, dict[str, int]] = {}  # origin -> entry path -> id
        self._next: dict[int, int] = {}  # fid -> when it is next needed (the caller's clock)
        self._far: list[tuple[int, int]] = []  # heap of (-next use, fid), stale entries skipped

    def want(self, fid: int, src: Src) -> None:
        """Announce an entry, so that an archive is opened once for all its wanted members."""
        path, origin, _ = src
        self.wanted.setdefault(origin, {})[path] = fid

    def get(self, fid: int, src: Src, next_use: int | None = None) -> I64 | None:
        """``fid``'s window set (``None``: unreadable or changed), made once if the budget
        allows; ``next_use``: when the caller needs it next, on its own clock (``-1``:
        never), for the eviction order."""
        if next_use is not None:
            self._next[fid] = next_use
            heapq.heappush(self._far, (-next_use if next_use >= 0 else -(1 << 62), fid))
        if fid not in self.cache:
            path, origin, view = src
            raw = view == "raw" and path == origin
            self._views(origin, {**self.wanted.get(origin, {}), path: fid}, raw)
            if fid not in self.cache:  # the entry is gone from its file: no exact score
                self._keep(fid, None)
        self.cache.move_to_end(fid)
        return self.cache[fid]

    def release(self, fid: int, src: Src) -> None:
        """Forget ``fid``'s set: no pair of the chunk needs it any more."""
        s = self.cache.pop(fid, None)
        self.held -= 0 if s is None else s.nbytes
        self._next.pop(fid, None)
        path, origin, _ = src
        left = self.wanted.get(origin)
        if left is not None:
            left.pop(path, None)
            if not left:
                del self.wanted[origin]

    def _views(self, origin: str, ids: dict[str, int], raw: bool = False) -> None:
        """Window sets of the entries ``ids`` (path -> id) of the file ``origin``.

        ``raw``: the entry may be the whole file as it is (a plain file in the
        raw view): it is read directly, with no sniffing of its type; when its
        digest is not the indexed one (a compressed file is indexed by its
        decompressed content, also in the raw view), through its content view.
        """
        from sif.content import ContentOptions, entries

        self.files_read += 1
        if raw:
            fid = ids.get(origin)
            try:
                f, _ = open_regular_file(origin)
                with f:
                    data = f.read()
            except OSError as exc:
                self.on_warning(ScanWarning(origin, exc.strerror or str(exc)))
                return
            self.bytes_read += len(data)
            if fid is not None and self._set_if_indexed(fid, data):
                return
        options = ContentOptions(normalize=self.normalize)
        for entry in entries(origin, options=options, on_warning=self.on_warning):
            fid = ids.get(entry.path)
            if fid is None or fid in self.cache:
                continue
            data = entry.read()
            self.bytes_read += len(data)
            if not self._set_if_indexed(fid, data):
                self.changed += 1
                self._keep(fid, None)

    def _set_if_indexed(self, fid: int, data: bytes) -> bool:
        """Keep the window set of ``data`` if it is the content indexed as ``fid``."""
        if self.sizes is not None:
            if len(data) != self.sizes.get(fid):
                return False
        elif blake3.blake3(data).digest() != self.digests.get(fid):
            return False
        if self.make is not None:
            self._keep(fid, self.make(data))
            return True
        self._keep(fid, _sets.window_set(data, self.window, self.jit, self.shifts.get(fid, 0)))
        return True

    def _keep(self, fid: int, s: I64 | None) -> None:
        self.cache[fid] = s
        self.held += 0 if s is None else s.nbytes
        while self.held > self.budget and len(self.cache) > 1:
            old = self._drop(fid)
            self.held -= 0 if old is None else old.nbytes

    def _drop(self, keep: int) -> I64 | None:
        """Take out of the cache the set needed last (else the least recently used),
        never ``keep`` (the one being made)."""
        far = self._far
        held_back: tuple[int, int] | None = None
        found: int | None = None
        while far:
            neg, fid = heapq.heappop(far)
            nxt = self._next.get(fid)
            if nxt is None or fid not in self.cache:
                continue  # released, or not made: a stale entry
            if (-neg if neg > -(1 << 62) else -1) != nxt:
                continue  # an older reading of this fid's clock
            if fid == keep:
                held_back = (neg, fid)
                continue
            found = fid
            break
        if held_back is not None:
            heapq.heappush(far, held_back)
        if found is not None:
            del self._next[found]
            return self.cache.pop(found)
        for fid in self.cache:  # no clock: least recently used first
            if fid != keep:
                return self.cache.pop(fid)
        return None
