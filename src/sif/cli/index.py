"""``sif index``: build or refresh the persistent index (incremental)."""

from __future__ import annotations

import sys
from typing import Any

import click

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
    content_options,
    fingerprint_options,
    from_last_run,
    index_option,
    normalize_from_options,
    params_from_options,
)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@index_option
@fingerprint_options
@content_options
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build the index anew, beside the old one, which answers queries until it is replaced.",
)
@click.option("--wait", is_flag=True, help="Wait while another process writes the index.")
@jobs_option
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
    jobs: int | None,
    checkpoint_bytes: int | None,
    from_file: Any,
    null: bool,
    quiet: bool,
    **filters: Any,
) -> None:
    """Build or refresh the index of the files under PATHS.

    Only files whose device, inode, size or modification time changed are
    read again; files under PATHS that are gone are dropped; files indexed
    from other paths are kept. Without fingerprint options, the parameters
    of the index's last run are used (winnow for a new index); other
    parameters are indexed beside, never mixed. Each file is indexed as its
    content views: archive members as entries of their own
    (a.zip!/dir/x.txt), compressed files on their decompressed content,
    PostScript without its prolog, ELF files as their strings; --normalize
    markup|code goes further, --raw indexes bytes as they are. The mode is
    part of the parameters. One writer at a time: a
    second one fails with "index in use (pid N)", or waits with --wait.

    Exit status: 0 done, 1 done with warnings, 2 usage error, 3 fatal error.
    """
    from sif.content import ContentOptions
    from sif.index import build_index, default_index_path
    from sif.report import human_size
    from sif.walk import WalkOptions

    roots = collect_roots(paths, from_file, null)
    filters["include"] = tuple(filters["include"])
    filters["exclude"] = tuple(filters["exclude"])
    options = WalkOptions(**filters)
    params, anchors = params_from_options(scheme, anchors_file, window, k, min_fingerprints)
    mode = normalize_from_options(normalize, raw)
    location = index or default_index_path()
    if not rebuild:
        params, anchors, mode = from_last_run(location, params, anchors, mode)
    warnings = WarningCounter(quiet)
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
        )
    finally:
        if progress is not None:
            progress.close()
    if not quiet:
        click.echo(
            f"sif: {stats.new:,} new, {stats.changed:,} changed, {stats.unchanged:,} unchanged, "
            f"{stats.removed:,} removed files; {stats.files_read:,} files read "
            f"({human_size(stats.bytes_read)}), {warnings.count} warnings, "
            f"{stats.seconds:.2f} s; index {location}",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)
