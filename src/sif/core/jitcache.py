"""Where numba keeps its compiled kernels: a per-user directory that can be written.

numba caches compiled functions beside their source (``__pycache__``) or in
``~/.cache/numba``; when sif is installed by one user and run by another (a
read-only site-packages, a container with no home), neither can be written
and ``@njit(cache=True)`` fails with "cannot cache function ... no locator
available". :func:`configure` (run by the first :func:`njit`, before numba
is imported) points ``NUMBA_CACHE_DIR`` at the user's cache directory, ``sif/numba`` under
``platformdirs.user_cache_dir``, or else at ``sif-UID/numba`` in the temporary
directory (made mode 0700 and owned by the user: the cache holds code that is
loaded), unless the user set ``NUMBA_CACHE_DIR``. :func:`njit` compiles
without a cache when no cache can be written at all: slower to start, never
a crash. The only file-system work of :mod:`sif.core`, all of it numba's.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from typing import Any


def _writable(path: str, private: str | None = None) -> bool:
    """Whether ``path`` is (now) a directory this process can write; ``private`` must be ours."""
    try:
        os.makedirs(private or path, mode=0o700, exist_ok=True)
        if private is not None:
            st = os.lstat(private)
            if (
                not stat.S_ISDIR(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            ):
                return False  # another user's, or a link: never load code from it
        os.makedirs(path, mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def cache_dir() -> str | None:
    """The per-user directory for numba's cache, made if needed; ``None`` if none can be written."""
    try:
        import platformdirs

        user = os.path.join(platformdirs.user_cache_dir("sif"), "numba")
    except Exception:  # no home directory to speak of
        user = None
    if user is not None and _writable(user):
        return user
    private = os.path.join(tempfile.gettempdir(), f"sif-{os.geteuid()}")
    fallback = os.path.join(private, "numba")
    return fallback if _writable(fallback, private) else None


def configure() -> None:
    """Set ``NUMBA_CACHE_DIR`` to :func:`cache_dir` unless the user set it (before numba loads)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    path = cache_dir()
    if path is None:
        return
    os.environ["NUMBA_CACHE_DIR"] = path
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba came first: it reads its environment again
        config.reload_config()


_configured = False


def njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)``, falling back to no cache when none can be written.

    The first call runs :func:`configure`, then imports numba.
    """
    global _configured
    if not _configured:
        _configured = True
        configure()
    from numba import njit as numba_njit

    def decorate(func: Callable[..., Any]) -> Any:
        if options.get("cache"):
            try:
                return _tolerant(numba_njit(**options)(func))
            except RuntimeError:  # "cannot cache function ...: no locator available"
                pass
        return numba_njit(**{**options, "cache": False})(func)

    return decorate


def _tolerant(dispatcher: Any) -> Any:
    """``dispatcher`` with its cache's saving made harmless: a cache directory that fills
    up or turns read-only after it was found writable (a full disk: ENOSPC as numba saves
    its index) leaves the kernel compiled and running, uncached, where the error ended
    ``sif explain`` and ``sif similar`` ("no space left on device", exit 3)."""
    cache = getattr(dispatcher, "_cache", None)
    save = getattr(cache, "save_overload", None)
    if save is None:
        return dispatcher

    def save_overload(sig: Any, data: Any) -> None:
        with contextlib.suppress(OSError):  # uncached: the next run compiles it again
            save(sig, data)

    cache.save_overload = save_overload  # type: ignore[union-attr]
    return dispatcher
