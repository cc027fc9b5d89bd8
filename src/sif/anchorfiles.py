"""Anchor sets on disk (``sif anchors learn``, ``--anchors FILE``).

Split from :mod:`sif.fingerprint`, which re-exports these functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import numpy as np

from sif.core.anchors import ANCHOR_LENGTH, DENSITY, AnchorSet, learn_anchors
from sif.errors import ConfigError, InputError
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fileio import open_regular_file
from sif.outfile import written_text


def load_anchors(path: str | os.PathLike[str]) -> AnchorSet:
    """Read an anchor file written by :func:`save_anchors`; :class:`InputError` if unusable."""
    from sif.fileio import refuse_device

    try:
        with open(path, encoding="utf-8") as f:
            refuse_device(f.fileno(), os.fspath(path))
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{os.fspath(path)}: cannot read anchor file: {exc}") from exc
    try:
        return AnchorSet.from_json(text)
    except ValueError as exc:
        raise InputError(f"{os.fspath(path)}: not a usable anchor file: {exc}") from exc


def save_anchors(anchors: AnchorSet, path: str | os.PathLike[str]) -> None:
    """Write ``anchors`` to ``path`` (JSON; as :func:`sif.outfile.written_text` writes: no cut
    file left when it fails)."""
    with written_text(path) as f:
        f.write(anchors.to_json())


def learn_anchors_from_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    length: int = ANCHOR_LENGTH,
    density: float = DENSITY,
    sample_bytes: int = 32 << 20,
    per_file: int = 256 << 10,
    on_warning: WarningSink = ignore_warning,
    on_file: Callable[[int], None] | None = None,
) -> AnchorSet:
    """Learn an anchor set from the first ``per_file`` bytes of each of ``paths``.

    Stops after ``sample_bytes`` bytes in all. Files holding a NUL byte in
    their sample are skipped (anchors are for text); unreadable files are
    reported to ``on_warning`` and skipped; ``on_file`` gets the bytes taken
    from each file (for progress). Raises :class:`ConfigError` for bad
    parameters or when the sample gives no anchor. Cost: reading at most
    ``sample_bytes``, then :func:`sif.core.anchors.learn_anchors`.
    """
    if not 2 <= length <= 8:
        raise ConfigError("anchor length must be 2..8 bytes")
    if not 0 < density < 1:
        raise ConfigError("density must be in (0, 1)")
    samples: list[np.ndarray] = []
    total = 0
    for path in paths:
        if total >= sample_bytes:
            break
        try:
            f, _ = open_regular_file(path)  # a FIFO or a device: a warning, not a hang
            with f:
                chunk = f.read(min(per_file, sample_bytes - total))
        except OSError as exc:
            on_warning(ScanWarning(os.fspath(path), exc.strerror or str(exc)))
            continue
        if b"\0" in chunk or len(chunk) < length:
            continue
        samples.append(np.frombuffer(chunk, dtype=np.uint8))
        total += len(chunk)
        if on_file is not None:
            on_file(len(chunk))
    try:
        return learn_anchors(samples, length=length, density=density)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
