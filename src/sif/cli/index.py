"""``sif index``: build or refresh the persistent index (incremental)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

# sif does no linear algebra: OpenBLAS's thread pool, started when numpy loads, only
# costs start-up (about 30 ms of a cold `sif index`; measured with 2 cores). A user's
# setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    collect_roots,
    fail_cleanly,
    jobs_option,
    make_progress,
    quiet_option,
    walk_options,
)
from sif.cli.index_options import (
    IndexAnchors,
    content_options,
    engine_options,
    fingerprint_options,
    from_last_run,
    index_option,
    make_engine,
    normalize_from_options,
    params_from_options,
)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str, readable=False))
@index_option
@fingerprint_options
@content_options
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build the index anew, beside the old one, which answers queries until it is replaced.",
)
@click.option("--wait", is_flag=True, help="Wait while another process writes the index.")
@click.option(
    "--info",
    is_flag=True,
    help="Show the index's parameter sets, entries, size and last runs; index nothing.",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Check every file of the index against its checksum; index nothing.",
)
@jobs_option
@engine_options
@click.option(
    "--memory-limit",
    help="--engine dask: memory per worker (2GB); a worker over it is restarted "
    "[default: the machine's memory shared out].",
)
@click.option("--checkpoint-bytes", type=click.IntRange(1), hidden=True)
@walk_options
@quiet_option
@fail_cleanly
def index(
    paths: tuple[str, ...],
    index: str | None,
    scheme: str | None,
    anchors_file: str | None,
    window: int | None,
    k: int | None,
    min_fingerprints: int | None,
    normalize: str | None,
    raw: bool,
    rebuild: bool,
    wait: bool,
    info: bool,
    verify: bool,
    jobs: int | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    memory_limit: str | None,
    checkpoint_bytes: int | None,
    from_file: Any,
    null: bool,
    quiet: bool,
    **filters: Any,
) -> None:
    """Build or refresh the index of the files under PATHS.

    Only files whose device, inode, size, modification time or ctime changed
    are read again; files under PATHS that are gone are dropped; files indexed
    from other paths are kept. Without fingerprint options, the parameters
    of the index's last run are used (winnow for a new index); other
    parameters are indexed beside, never mixed. Each file is indexed as its
    content views: archive members as entries of their own
    (a.zip!/dir/x.txt), compressed files on their decompressed content,
    PostScript without its prolog, ELF files as their strings; --normalize
    markup|code goes further, --raw indexes bytes as they are. The mode is
    part of the parameters. One writer at a time: a
    second one fails with "index in use (pid N)", or waits with --wait.

    --info shows what the index holds; --verify checks every file of it
    against its checksum (a damaged index is named, "index corrupt: PATH",
    exit 3, and --rebuild recovers). Each run verifies the index before it
    builds on it.

    --engine dask reads the files on a Dask cluster (--scheduler ADDRESS, or a
    local one of --workers processes of --memory-limit each); this process
    walks and writes the index. Without the extra (pip install 'sif[dask]')
    it fails at once, exit 3.

    Exit status: 0 done, 1 done with warnings, 2 usage error, 3 fatal error.
    """
    from sif.content import ContentOptions
    from sif.index import build_index, default_index_path
    from sif.report import human_size
    from sif.walk import WalkOptions

    if info or verify:
        if paths or from_file is not None or rebuild or (info and verify):
            raise click.UsageError("--info and --verify take no PATH, and no other action")
        location = index or default_index_path()
        _info(location, wait) if info else _verify(location, wait, quiet)
        sys.exit(EXIT_OK)
    warnings = WarningCounter(quiet)
    roots = collect_roots(paths, from_file, null, warnings)
    filters["include"] = tuple(filters["include"])
    filters["exclude"] = tuple(filters["exclude"])
    options = WalkOptions(**filters)
    params, anchors = params_from_options(scheme, anchors_file, window, k, min_fingerprints)
    mode = normalize_from_options(normalize, raw)
    location = index or default_index_path()
    if not rebuild:
        params, anchors, mode = from_last_run(location, params, anchors, mode)
    elif isinstance(params, IndexAnchors):  # the index's set is about to be discarded
        raise click.UsageError("--rebuild --scheme anchors needs --anchors FILE")
    if memory_limit is not None and engine != "dask":
        raise click.UsageError("--memory-limit (per worker) goes with --engine dask")
    runner = make_engine(engine, scheduler, workers, memory_limit)
    progress = make_progress(quiet)
    from sif.index.build import CHECKPOINT_BYTES

    try:
        stats = build_index(
            roots,
            location,
            params,
            anchors,
            options=options,
            content=ContentOptions(normalize=mode or "auto"),
            wait=wait,
            rebuild=rebuild,
            jobs=jobs,
            on_warning=warnings,
            progress=progress,
            checkpoint_bytes=checkpoint_bytes or CHECKPOINT_BYTES,
            engine=runner,
        )
    finally:
        if progress is not None:
            progress.close()
        if runner is not None:
            runner.close()
    if not quiet:
        click.echo(
            f"sif: {stats.new:,} new, {stats.changed:,} changed, {stats.unchanged:,} unchanged, "
            f"{stats.removed:,} removed files; {stats.files_read:,} files read "
            f"({human_size(stats.bytes_read)}), {warnings.count} warnings, "
            f"{stats.seconds:.2f} s; index {location}",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


def _info(location: str, wait: bool) -> None:
    import datetime

    from sif.events import display_path
    from sif.index.health import index_info
    from sif.report import human_size

    info = index_info(location, wait=wait)
    lines = [
        f"index {display_path(info.root)}: {human_size(info.bytes)} on disk, "
        f"schema {info.schema}, "
        f"{len(info.sets)} parameter set{'s' if len(info.sets) != 1 else ''}"
    ]
    for s in info.sets:
        mark = " (last used)" if s.params == info.last_params else ""
        lines.append(f"  {s.params}{mark}")
        lines.append(
            f"    {s.files:,} entries, {s.rows:,} fingerprints in {s.segments:,} "
            f"segment{'s' if s.segments != 1 else ''}"
        )
        run = s.last_run
        if run:
            when = datetime.datetime.fromtimestamp(float(run.get("time", 0)), datetime.UTC)
            # As the reports show names: a newline or a byte that is not UTF-8 quoted
            roots = " ".join(display_path(str(r)) for r in run.get("roots", []))
            lines.append(f"    last run {when:%Y-%m-%d %H:%M:%S} UTC: {roots}")
        else:
            lines.append("    last run: not recorded (an older sif)")
    click.echo("\n".join(lines))


def _verify(location: str, wait: bool, quiet: bool) -> None:
    from sif.index.health import verify_index

    result = verify_index(location, wait=wait)
    if not quiet:
        older = (
            f" ({result.unchecked:,} made by an older sif, checked for consistency only)"
            if result.unchecked
            else ""
        )
        click.echo(
            f"sif: index {location} is sound: {result.segments:,} "
            f"segment{'s' if result.segments != 1 else ''} checked{older}, "
            f"{result.files:,} entries",
            err=True,
        )
