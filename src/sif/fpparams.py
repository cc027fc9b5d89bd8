"""Fingerprint parameters: :class:`FingerprintParams` and :func:`make_params`.

Split from :mod:`sif.fingerprint` (which re-exports both): the value that
travels with fingerprints wherever they are stored; two values are equal
exactly when they give the same fingerprints.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from sif.core.anchors import AnchorSet
from sif.core.rolling import MODULUS_BITS, WINDOW
from sif.core.sampling import (
    MAX_PERIOD,
    K,
    sif94_density,
    winnow_density,
    winnow_window_for,
)
from sif.errors import ConfigError

SCHEMES = ("winnow", "sif94", "anchors")
#: Bump when a change of code changes the fingerprints of the same parameters.
PARAMS_VERSION = 1


@dataclass(frozen=True)
class FingerprintParams:
    """What makes fingerprints: a frozen, hashable, canonical value.

    Fields that a scheme does not use are ``None``; defaults are filled in,
    so equal values give equal fingerprints. ``to_dict``/``key`` give a
    stable form to store next to fingerprints; ``from_dict`` reads it back.
    Raises :class:`ConfigError` for a bad value, before any work.

    - ``window``: ``w``, bytes per window (the paper's 50, section 2);
    - ``k``: ``sif94`` only: keep values whose low ``k`` bits are 0 (paper: 8);
    - ``modulus_bits``: ``sif94`` only: ``M = 2^bits`` (paper: 30; 31 or 32
      "if the number of files is very large");
    - ``winnow_window``: ``winnow`` only: ``W`` (default ``2^(k+1) - 1`` for
      ``k = 8``: 511); pass ``k`` to :func:`make_params` to set the density;
    - ``max_period``: ``winnow`` and ``anchors``: windows with a period of at
      most this are degenerate and never kept (default 8; 0 keeps them);
    - ``min_fingerprints``: ``sif94`` and ``winnow``: the small-file floor ``N``
      (default 0, off);
    - ``anchors_digest``: ``anchors`` only: :attr:`AnchorSet.digest`.
    """

    scheme: str = "winnow"
    window: int = WINDOW
    k: int | None = None
    modulus_bits: int | None = None
    winnow_window: int | None = None
    max_period: int | None = None
    min_fingerprints: int = 0
    anchors_digest: str | None = None
    version: int = PARAMS_VERSION

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        def unused(*names: str) -> None:
            for name in names:
                if getattr(self, name) is not None:
                    raise ConfigError(f"{name} does not apply to scheme {self.scheme!r}")

        if self.scheme not in SCHEMES:
            raise ConfigError(f"unknown scheme {self.scheme!r} (choose from {', '.join(SCHEMES)})")
        if self.version != PARAMS_VERSION:
            raise ConfigError(f"fingerprint parameters version {self.version} is not supported")
        _check_int("window", self.window, 2, 1 << 16)
        _check_int("min_fingerprints", self.min_fingerprints, 0, 100_000)
        if self.scheme == "sif94":
            unused("winnow_window", "max_period", "anchors_digest")
            put("k", K if self.k is None else self.k)
            put("modulus_bits", MODULUS_BITS if self.modulus_bits is None else self.modulus_bits)
            _check_int("modulus_bits", self.modulus_bits, 16, 64)
            _check_int("k", self.k, 0, min(24, int(self.modulus_bits or 0) - 1))
        elif self.scheme == "winnow":
            unused("modulus_bits", "anchors_digest")
            if self.k is not None:
                if self.winnow_window is not None:
                    raise ConfigError("give k or winnow_window, not both")
                _check_int("k", self.k, 1, 24)
                put("winnow_window", winnow_window_for(self.k))
                put("k", None)
            put("winnow_window", self.winnow_window or winnow_window_for(K))
            _check_int("winnow_window", self.winnow_window, 1, 1 << 25)
        else:
            unused("k", "modulus_bits", "winnow_window")
            if not self.anchors_digest:
                raise ConfigError("scheme 'anchors' needs an anchor set (--anchors FILE)")
            if self.min_fingerprints:
                raise ConfigError("min_fingerprints is not available with scheme 'anchors'")
        if self.scheme != "sif94":
            put("max_period", MAX_PERIOD if self.max_period is None else self.max_period)
            _check_int("max_period", self.max_period, 0, self.window // 2)

    @property
    def density(self) -> float | None:
        """Expected fingerprints per byte on random data (``None`` for anchors: see the set)."""
        if self.scheme == "sif94":
            return sif94_density(self.window, int(self.k or 0))
        if self.scheme == "winnow":
            return winnow_density(int(self.winnow_window or 1))
        return None

    @property
    def guaranteed_run(self) -> int | None:
        """Length of a shared run that always yields a shared fingerprint (winnow only)."""
        if self.scheme == "winnow":
            return self.window + int(self.winnow_window or 1) - 1
        return None

    def to_dict(self) -> dict[str, Any]:
        """The parameters that apply, as a plain dict with sorted keys."""
        return {k: v for k, v in sorted(asdict(self).items()) if v is not None}

    def key(self) -> str:
        """A stable one-line form: compact JSON of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FingerprintParams:
        """Read :meth:`to_dict`'s output back; ``ConfigError`` on unknown or bad fields."""
        known = {f.name for f in fields(cls)}
        extra = set(data) - known
        if extra:
            raise ConfigError(f"unknown fingerprint parameters: {', '.join(sorted(extra))}")
        return cls(**data)


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def make_params(
    scheme: str | FingerprintParams = "winnow",
    anchors: AnchorSet | None = None,
    **params: Any,
) -> FingerprintParams:
    """Validated parameters from keyword arguments (or a ready value, then no keywords).

    For ``winnow``, ``k=K`` sets ``W = 2^(K+1) - 1`` (density ``2^-K``).
    Raises :class:`ConfigError` for a bad or missing value, or when
    ``anchors`` does not match ``anchors_digest``.
    """
    if isinstance(scheme, FingerprintParams):
        if params:
            raise ConfigError("give a FingerprintParams or keyword parameters, not both")
        result = scheme
    else:
        if scheme == "anchors" and anchors is not None:
            params.setdefault("anchors_digest", anchors.digest)
        unknown = set(params) - {f.name for f in fields(FingerprintParams)}
        if unknown:
            raise ConfigError(f"unknown fingerprint parameters: {', '.join(sorted(unknown))}")
        result = FingerprintParams(scheme=scheme, **params)
    if result.scheme == "anchors":
        if anchors is None:
            raise ConfigError("scheme 'anchors' needs the anchor set itself (anchors=...)")
        if anchors.digest != result.anchors_digest:
            raise ConfigError("the anchor set does not match the parameters' anchors_digest")
    return result
