"""The archive members that ``sif compare``'s pass 1 scores: held in memory up to a
budget, the others copied to temporary files.

Pass 1 scores a ``changed`` member against the other side's file at its
path. It held the bytes of every such member at once (one read of each
archive), and scored them by their whole window sets, 9 bytes a byte: two
tarballs holding two versions of a 100 MB file took 3.6 GB and 27 s. Now a
member is held in memory while the members held total under
:data:`MEMBER_MEMORY` and its pair is small (under
:data:`sif.compare.large.EXACT_BYTES` of sets); the others are copied, a
megabyte at a time, into a private temporary directory (Python's
:func:`tempfile.gettempdir`: ``TMPDIR`` if it can be written, else ``/tmp``
...), and scored as files on disk are: a large pair a step at a time, on a
sample (:mod:`sif.compare.large`). The directory goes when the pass ends,
on Ctrl-C, and on SIGTERM or SIGHUP (then the process ends by that signal);
a signal it does not handle (SIGKILL, SIGQUIT...) leaves it (``sif-compare-*``).

A member that cannot be copied (a full disk) or that reads other than its
listed size is a warning naming it, and its pair gets no score. A name a tar
holds twice (``tar -r``) is its last copy, as when the archive was listed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

from sif.compare.large import Listed
from sif.events import ScanWarning, WarningSink

#: Bytes of members pass 1 holds in memory at once; beyond, they wait in temporary files.
MEMBER_MEMORY = 64 << 20
#: The temporary directory of a run's copied members begins so.
SPOOL_PREFIX = "sif-compare-"
#: Bytes copied at a time.
COPY_BYTES = 1 << 20
#: Signals that remove the copies before they end the process (their default action).
_ENDING = (signal.SIGTERM, signal.SIGHUP)


class _Ended(BaseException):
    """A signal of :data:`_ENDING` arrived while copies exist."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Members:
    """The members read for pass 1, by their path (``ARCHIVE!/MEMBER``): bytes in memory,
    or a temporary file of this run as a :data:`sif.compare.large.Listed`.

    A context manager: on leaving, the copies are removed; inside, SIGTERM and
    SIGHUP (when at their default action, in the main thread) remove them too,
    then end the process as they would have. While the handlers are put in
    place, while the directory is made, and while the copies are removed, such
    a signal, or a Ctrl-C the caller handles, is only noted, and acted on once
    that is done: a second signal cannot cut the removal short.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.files: dict[str, Listed] = {}
        self.held = 0
        self.directory: str | None = None
        self._pending: dict[str, ScanWarning] = {}
        self._handlers: dict[int, Any] = {}
        self._noted: int | None = None
        self._unwinding = False  # a signal was acted on: the run is on its way out

    def get(self, path: str) -> bytes | Listed | None:
        """The member's bytes, its copy on disk, or ``None`` (not read: warned)."""
        found = self.data.get(path)
        return found if found is not None else self.files.get(path)

    def close(self) -> None:
        """Remove the temporary directory this run made, with the copies in it."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if (
            _QUIET[0]
            or self._unwinding
            # Also at the first instruction of __exit__ (Python runs handlers on entering
            # a function), before it can say so itself.
            or (frame is not None and frame.f_code is _EXIT_CODE)
        ):
            if self._noted is None or self._noted == signal.SIGINT:
                self._noted = signum  # an ending signal outranks a Ctrl-C
            return
        # From here the run unwinds: a second signal is only noted (raised inside a
        # generator's finaliser as the first unwinds, Python would print it).
        if signum == signal.SIGINT:
            self._unwinding = True  # a second one while the caller's runs is noted
            self._handlers[signum](signum, frame)  # the caller's: KeyboardInterrupt
            self._unwinding = False  # it only took note: the run goes on
            return
        self._unwinding = True
        self._noted = signum  # and noted: a finaliser Python runs may drop the raise
        raise _Ended(signum)

    def _act(self, exc: BaseException | None = None) -> None:
        """Act on the signal noted, unless ``exc`` on its way already is its effect."""
        signum, self._noted = self._noted, None
        if isinstance(exc, _Ended):
            signum = exc.signum
        if signum is None or (signum == signal.SIGINT and isinstance(exc, KeyboardInterrupt)):
            return
        if signum == signal.SIGINT and signum in self._handlers:
            self._handlers[signum](signum, None)  # the caller's own, as if it came now
        else:
            # The default action (the handlers are restored): the process ends.
            signal.raise_signal(signum)

    def check(self) -> None:
        """Act on a signal noted but not acted on (noted in a quiet section, or raised in
        a finaliser that dropped it: see above)."""
        signum = self._noted
        if signum is None or _QUIET[0]:
            return
        if signum != signal.SIGINT:
            self._unwinding = True
            raise _Ended(signum)  # still noted, for the exit
        self._noted = None
        if signum in self._handlers:
            self._handlers[signum](signum, None)  # the caller's: KeyboardInterrupt

    @contextlib.contextmanager
    def _held_back(self) -> Iterator[None]:
        """Signals noted, not acted on, inside; the one noted acted on after."""
        _QUIET[0] += 1
        try:
            yield
        finally:
            _QUIET[0] -= 1
        self.check()

    def __enter__(self) -> Members:
        if threading.current_thread() is not threading.main_thread():
            return self
        _QUIET[0] += 1
        try:
            for sig in _ENDING:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    self._handlers[sig] = signal.signal(sig, self._on_signal)
            if callable(signal.getsignal(signal.SIGINT)):
                # Ctrl-C as the caller handles it, but only noted while the copies go.
                self._handlers[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_signal)
        except BaseException:  # (signal.signal runs pending handlers first)
            self._restore()
            self._handlers = {}
            raise
        finally:
            _QUIET[0] -= 1
        if self._noted is not None:  # while the handlers were put in place
            self.__exit__(None, None, None)
        return self

    def _restore(self) -> None:
        for sig, old in self._handlers.items():
            signal.signal(sig, old)

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        _QUIET[0] += 1  # nothing cuts the removal short
        try:
            self.close()
        finally:
            try:
                self._restore()
            finally:
                _QUIET[0] -= 1
        self._unwinding = False
        # Only the caller's Ctrl-C handler is kept, for _act; the others are restored.
        self._handlers = {k: v for k, v in self._handlers.items() if k == signal.SIGINT}
        try:
            self._act(exc)
        finally:
            self._handlers = {}

    def read(self, wanted: Iterable[tuple[str, str, int, bool]], on_warning: WarningSink) -> None:
        """The members ``wanted`` (archive, member path, listed size, whether to copy it to
        disk whatever its size), one read of each archive."""
        from sif.content import ContentOptions, entries

        by_archive: dict[str, dict[str, tuple[int, bool]]] = defaultdict(dict)
        for archive, path, size, to_disk in wanted:
            by_archive[archive][path] = (size, to_disk)
        for archive, members in by_archive.items():
            options = ContentOptions(normalize="unpack")
            seen: set[str] = set()
            for e in entries(archive, options=options, on_warning=on_warning):
                self.check()
                if e.path in members:
                    self._keep(e, *members[e.path])
                    seen.add(e.path)
            # A name held twice is its last copy: only that one's warning is told.
            for w in self._pending.values():
                on_warning(w)
            self._pending.clear()
            for path in sorted(members.keys() - seen):
                on_warning(ScanWarning(path, "gone from its archive since it was listed"))

    def _drop(self, path: str) -> None:
        """Forget an earlier copy of ``path`` (a name a tar holds twice)."""
        self._pending.pop(path, None)
        data = self.data.pop(path, None)
        if data is not None:
            self.held -= len(data)
        listed = self.files.pop(path, None)
        if listed is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(listed[0])  # this run's copy

    def _warn(self, path: str, cause: str) -> None:
        self._pending[path] = ScanWarning(path, cause)

    def _keep(self, e: Any, listed: int, to_disk: bool) -> None:
        """The entry ``e`` of listed size ``listed``, in memory or (``to_disk``, or past
        :data:`MEMBER_MEMORY`) in a temporary file."""
        self._drop(e.path)
        if not to_disk and self.held + listed <= MEMBER_MEMORY:
            try:
                data = e.read(listed + 1)  # no more than listed: one byte tells a change
            except OSError as exc:
                self._warn(e.path, exc.strerror or str(exc))
                return
            if self._same_size(e.path, listed, len(data)):
                self.data[e.path] = data
                self.held += len(data)
            return
        self._copy(e, listed)

    def _copy(self, e: Any, listed: int) -> None:
        try:
            src = e.open()
        except OSError as exc:
            self._warn(e.path, exc.strerror or str(exc))
            return
        with src:
            try:
                if self.directory is None:
                    with self._held_back():  # made and named as one step
                        self.directory = tempfile.mkdtemp(prefix=SPOOL_PREFIX)
                fd, path = tempfile.mkstemp(dir=self.directory)
            except OSError as exc:
                self._warn(e.path, _no_room(exc, self.directory))
                return
            written = 0
            try:
                with os.fdopen(fd, "wb") as out:
                    while written <= listed:
                        try:  # no more than listed: one byte tells a change
                            chunk = src.read(min(COPY_BYTES, listed + 1 - written))
                        except OSError as exc:  # the archive, not the copy
                            self._warn(e.path, exc.strerror or str(exc))
                            written = -1
                            break
                        if not chunk:
                            break
                        out.write(chunk)
                        written += len(chunk)
                st = os.stat(path)
            except OSError as exc:
                self._warn(e.path, _no_room(exc, self.directory))
                written = -1
        if written < 0 or not self._same_size(e.path, listed, written):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # this run's copy, cut short
            return
        self.files[e.path] = (path, (st.st_dev, st.st_ino), written)

    def _same_size(self, path: str, listed: int, read: int) -> bool:
        """Whether a member read ``read`` bytes where its listing said ``listed``; if not,
        a warning: the archive changed during the run, or its stream ended early."""
        if read == listed:
            return True
        got = f"{read:,}" if read <= listed else f"over {listed:,}"
        self._warn(path, f"changed during the run ({got} bytes read, {listed:,} listed)")
        return False


def _no_room(exc: OSError, directory: str | None) -> str:
    where = directory or exc.filename or "a temporary directory"
    return f"cannot be copied for comparison into {where}: {exc.strerror or exc}"


_EXIT_CODE = Members.__exit__.__code__
#: Depth of the sections, of any :class:`Members` of the process, where a signal is only
#: noted (a nested one's removal too: the outer one's handlers are the installed ones).
_QUIET = [0]
