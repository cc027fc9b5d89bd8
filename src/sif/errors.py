"""The one exception hierarchy of sif.

::

    SifError                    base of everything sif raises on purpose
    ├── ConfigError             a bad argument or option; raised before any work starts
    ├── IndexUnusable             the persistent index cannot be used
    │   ├── IndexCorrupt        the file is not a readable sif index (``--rebuild`` recovers)
    │   ├── IndexInUse          another process writes the index
    │   └── IndexParamsMismatch the index holds fingerprints made with other parameters
    ├── InputError              an input (a report, an anchor file, a digest list) is unreadable
    ├── OutOfMemory             a memory limit (``--memory-limit``) is too small for the work
    ├── EngineUnavailable       an engine cannot run (its extra not installed, no scheduler)
    └── WorkerDied              a worker process died (the OOM killer, a signal): the run stopped

Per-file problems met during a scan are never raised to the caller: they are
:class:`sif.events.ScanWarning` values handed to the ``on_warning`` callback.
The CLI maps this hierarchy to messages and exit codes in one place
(:mod:`sif.cli.common`).
"""

from __future__ import annotations


class SifError(Exception):
    """Base class of the errors sif raises on purpose."""


class ConfigError(SifError):
    """A bad argument or option, detected before any work starts."""


class IndexUnusable(SifError):
    """The persistent index cannot be used."""


class IndexCorrupt(IndexUnusable):
    """The index file is damaged or is not a sif index."""


class IndexInUse(IndexUnusable):
    """Another process holds the index for writing."""


class IndexParamsMismatch(IndexUnusable):
    """The index holds fingerprints made under other parameters."""


class InputError(SifError):
    """An input file that sif must parse (a report, anchors, digests) is unusable."""


class OutOfMemory(SifError):
    """The work does not fit under the memory limit it was given, even spilling to disk."""


class EngineUnavailable(SifError):
    """An engine cannot run: its extra is not installed, or its cluster cannot be reached."""


class WorkerDied(SifError):
    """A worker process died (killed by the OOM killer or a signal): the run stopped."""
