"""Options shared by the commands that use the index: ``--index`` and the fingerprint parameters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def index_option(func: F) -> F:
    """``--index PATH`` (or ``$SIF_INDEX``; default under the user's cache directory)."""
    return click.option(
        "--index",
        "index",
        envvar="SIF_INDEX",
        type=click.Path(file_okay=False, path_type=str),
        callback=_index_path,
        help="The index directory [env SIF_INDEX; default: the user's cache dir, sif/index].",
    )(func)


def _index_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A usage error for an index path no index can have: empty (it meant the default
    index, written unasked), not UTF-8 (DuckDB failed on it with ``std::bad_cast``, after
    files were made there), or a FIFO, a device or a socket (an error no one foresaw)."""
    import os
    import stat

    from sif.events import display_path

    if value is None:
        return None
    if not value:
        raise click.BadParameter("an empty path", ctx, param)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.BadParameter(
            f"{display_path(value)}: not a UTF-8 name (the index's catalog takes none)", ctx, param
        ) from None
    try:
        mode = os.stat(value).st_mode
    except (OSError, ValueError):
        return value  # missing (made by sif index), or named by the command that opens it
    if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
        raise click.BadParameter(f"{display_path(value)}: a special file, not a directory")
    return value


def fingerprint_options(func: F) -> F:
    """``--scheme``, ``--anchors``, ``--window``, ``--density-bits``, ``--min-fingerprints``."""
    options = [
        click.option(
            "--scheme",
            type=click.Choice(["winnow", "sif94", "anchors"]),
            help="Fingerprint scheme [default: the index's last, else winnow].",
        ),
        click.option(
            "--anchors",
            "anchors_file",
            type=click.Path(dir_okay=False, path_type=str),
            help="Anchor set for --scheme anchors (from 'sif anchors learn') "
            "[default: the index's, if it holds one].",
        ),
        click.option("--window", type=int, help="Bytes per fingerprinted window (50)."),
        click.option(
            "-k",
            "--density-bits",
            "k",
            type=int,
            help="About one fingerprint per 2^K bytes (8).",
        ),
        click.option(
            "--min-fingerprints",
            type=int,
            help="Small-file floor: at least this many fingerprints per file "
            "(winnow: 20 by default; 0: off).",
        ),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def content_options(func: F) -> F:
    """``--normalize auto|markup|code`` and ``--raw``: how files become content views."""
    options = [
        click.option(
            "--normalize",
            type=click.Choice(["auto", "markup", "code"]),
            help="Content views: auto (PostScript without prolog, ELF strings, compressed "
            "files decompressed, archive members as entries), markup (also troff/TeX/HTML "
            "tags removed), code (also source as tokens with placeholders) "
            "[default: the index's last, else auto].",
        ),
        click.option(
            "--raw",
            is_flag=True,
            help="No content views: every file as its bytes (--normalize raw).",
        ),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def normalize_from_options(normalize: str | None, raw: bool) -> str | None:
    """The normalisation mode asked for, or ``None``; ``ConfigError`` for both options at once."""
    from sif.errors import ConfigError

    if raw and normalize:
        raise ConfigError("give --raw or --normalize, not both")
    return "raw" if raw else normalize


@dataclass(frozen=True)
class IndexAnchors:
    """``--scheme anchors`` without ``--anchors``: the index's one anchor set, found
    when the index is opened (:func:`pick_anchor_set`); ``window`` narrows the choice."""

    window: int | None = None


def params_from_options(
    scheme: str | None,
    anchors_file: str | None,
    window: int | None,
    k: int | None,
    min_fingerprints: int | None,
) -> tuple[Any, Any]:
    """(FingerprintParams, AnchorSet) from the options, or (None, None) if none was given.

    ``--scheme anchors`` without ``--anchors`` gives (:class:`IndexAnchors`,
    None): the index's anchor set if it holds exactly one. Raises
    :class:`sif.errors.ConfigError` for bad values (``--anchors`` without
    ``--scheme anchors`` among them), before any work.
    """
    from sif.errors import ConfigError
    from sif.fingerprint import load_anchors, make_params

    given = {
        k: v
        for k, v in {"window": window, "k": k, "min_fingerprints": min_fingerprints}.items()
        if v is not None
    }
    if anchors_file and scheme != "anchors":
        raise ConfigError("--anchors FILE goes with --scheme anchors")
    if scheme is None:
        if given:
            scheme = "winnow"
        else:
            return None, None
    if scheme == "winnow" and min_fingerprints is None:  # the index's small-file tier
        from sif.index.build import SMALL_FILE_FINGERPRINTS

        given["min_fingerprints"] = SMALL_FILE_FINGERPRINTS
    if scheme == "anchors" and not anchors_file:
        if k is not None or min_fingerprints is not None:
            raise ConfigError("-k and --min-fingerprints do not apply to --scheme anchors")
        return IndexAnchors(window), None
    anchors = load_anchors(anchors_file) if anchors_file else None
    return make_params(scheme, anchors, **given), anchors


def pick_anchor_set(reader: Any, wanted: IndexAnchors, mode: str | None) -> tuple[Any, Any]:
    """(params, AnchorSet) of the one anchor set the index holds that fits ``wanted``
    and ``mode``; :class:`sif.errors.ConfigError` when it holds none or several."""
    from sif.errors import ConfigError

    fits: list[Any] = []
    for s in reader.parameter_sets():
        if s.params.scheme != "anchors" or (mode is not None and s.normalize != mode):
            continue
        if wanted.window is not None and s.params.window != wanted.window:
            continue
        if s.params not in [f.params for f in fits]:
            fits.append(s)
    if len(fits) == 1:
        return fits[0].params, reader.anchors(fits[0])
    if not fits:
        raise ConfigError("--scheme anchors needs --anchors FILE: the index holds no anchor set")
    held = "; ".join(str(s) for s in fits)
    raise ConfigError(f"the index holds {len(fits)} anchor sets ({held}): name one with --anchors")


def from_last_run(
    location: str, params: Any, anchors: Any, mode: str | None
) -> tuple[Any, Any, str | None]:
    """Fill in what the user did not ask for from the index's last run.

    The fingerprint parameters (with their stored anchor set) and the content
    normalisation each come from the most recent parameter set when not
    given (:class:`IndexAnchors`: the index's one anchor set); an index that
    does not exist yet, or holds nothing, changes nothing. A damaged index
    raises :class:`sif.errors.IndexCorrupt`: never a silent default.
    """
    from sif.errors import ConfigError, IndexCorrupt, IndexUnusable
    from sif.index import open_reader

    if params is not None and not isinstance(params, IndexAnchors) and mode is not None:
        return params, anchors, mode
    try:
        reader = open_reader(location)
    except IndexCorrupt:
        raise
    except IndexUnusable:  # no index there yet
        if isinstance(params, IndexAnchors):
            raise ConfigError(
                "--scheme anchors needs --anchors FILE: there is no index yet"
            ) from None
        return params, anchors, mode
    try:
        if isinstance(params, IndexAnchors):
            params, anchors = pick_anchor_set(reader, params, mode)
        sets = reader.parameter_sets()
        if sets:
            last = sets[0]
            if params is None:
                params, anchors = last.params, reader.anchors(last)
            mode = mode or last.normalize
    finally:
        reader.close()
    return params, anchors, mode


def engine_options(func: F) -> F:
    """``--engine embedded|dask``, ``--scheduler ADDRESS``, ``--workers N``."""
    options = [
        click.option(
            "--engine",
            type=click.Choice(["embedded", "dask"]),
            default="embedded",
            show_default=True,
            help="Where files are fingerprinted and collated: here, or on a Dask cluster "
            "(pip install 'sif[dask]'; workers must see the same paths).",
        ),
        click.option(
            "--scheduler",
            metavar="ADDRESS",
            help="--engine dask: the address of a running Dask scheduler (tcp://host:8786) "
            "[default: a local cluster].",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1),
            help="--engine dask without --scheduler: worker processes of the local cluster "
            "[default: the cores].",
        ),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def make_engine(
    engine: str, scheduler: str | None, workers: int | None, memory_limit: str | None
) -> Any:
    """The engine asked for: ``None`` (embedded) or a :class:`sif.executors.dask.DaskEngine`.

    Before any work: :class:`sif.errors.ConfigError` for Dask options without
    ``--engine dask``, :class:`sif.errors.EngineUnavailable` (one line naming the
    extra) when dask is not installed. ``memory_limit``: per worker.
    """
    from sif.errors import ConfigError

    if engine != "dask":
        if scheduler is not None or workers is not None:
            raise ConfigError("--scheduler and --workers go with --engine dask")
        return None
    from sif.executors.dask import DaskEngine

    return DaskEngine(scheduler, workers, memory_limit)
