"""``sif dupes``: groups of exact replicas."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

import click

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    collect_roots,
    fail_cleanly,
    format_option,
    jobs_option,
    make_progress,
    quiet_option,
    report_output,
    walk_options,
)
from sif.exact import DupesStats, find_duplicates
from sif.report import DUPES_FORMATS, human_size, write_dupes


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str, readable=False))
@walk_options
@format_option(*DUPES_FORMATS)
@jobs_option
@click.option(
    "--archives",
    is_flag=True,
    help="Also compare the members of zip and tar archives (.zip, .jar, .whl, .tar, .tar.gz...), "
    "shown as ARCHIVE!/MEMBER and matched by size and BLAKE3.",
)
@click.option(
    "--dirs",
    is_flag=True,
    help="Groups of directories whose whole content is identical (names ignored).",
)
@click.option("--match-names", is_flag=True, help="With --dirs: the names must match too.")
@click.option("-v", "--verbose", is_flag=True, help="Log the candidates left after each stage.")
@quiet_option
@fail_cleanly
def dupes(
    paths: tuple[str, ...],
    from_file: Any,
    null: bool,
    fmt: str,
    jobs: int | None,
    archives: bool,
    dirs: bool,
    match_names: bool,
    verbose: bool,
    quiet: bool,
    **filters: Any,
) -> None:
    """Groups of exact replicas (identical content) among the files under PATHS.

    Files are compared by size, then block by block, byte for byte. Hardlinks
    of one file are one file: their names are listed together and never count
    as redundant. Empty files are left out (--empty), symbolic links are not
    followed (-L) and hidden files are included (--no-hidden).

    With -0, the names are printed raw, each ending in NUL, a group ending in
    an extra NUL (text and fdupes formats; -0 with json or csv is an error).

    Exit status: 0 done, 1 some files skipped (warnings), 2 usage error, 3 fatal
    error, 130 interrupted.
    """
    if (dirs or match_names) and (null or fmt == "fdupes" or archives or not dirs):
        raise click.UsageError(
            "--dirs takes text, json or csv, no -0 or --archives; --match-names goes with --dirs"
        )
    if null and fmt in ("json", "csv"):
        raise click.UsageError(
            f"-0 writes the names ending in NUL, not {fmt}: give -0 or --format {fmt}"
        )
    roots = collect_roots(paths, from_file, null)
    warnings = WarningCounter(quiet)
    stats = DupesStats()
    progress = make_progress(quiet)
    try:
        groups = find_duplicates(
            roots,
            jobs=jobs,
            archives=archives,
            on_warning=warnings,
            progress=progress,
            stats=stats,
            **filters,
        )
    finally:
        if progress is not None:
            progress.close()
    with report_output() as out:
        if dirs:
            _write_dirs(roots, groups, fmt, match_names, warnings, filters, out)
        else:
            from sif.actions.report import dupes_header, write_report

            header = dupes_header(roots, sys.argv[1:])
            if fmt == "json":  # the report the actions read (sif link, remove, dedupe)
                write_report(groups, out, header)
            else:
                write_dupes(groups, out, fmt, nul=null, header=header)
    if verbose and not quiet:
        for stage, n in stats.survivors:
            click.echo(f"sif: {n:,} candidates after {stage}", err=True)
    if not quiet:
        click.echo(
            f"sif: {stats.files:,} files scanned ({human_size(stats.bytes_scanned)}), "
            f"{stats.groups:,} groups of replicas, {stats.redundant_files:,} redundant files "
            f"({human_size(stats.redundant_bytes)}), {human_size(stats.bytes_read)} read, "
            f"{warnings.count} warnings, {stats.seconds:.2f} s",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


def _write_dirs(
    roots: list[str],
    groups: Any,
    fmt: str,
    match_names: bool,
    warn: Any,
    filters: Any,
    out: BinaryIO,
) -> None:
    """``--dirs``: the groups of identical directories (:mod:`sif.compare.dirs`)."""
    from sif.compare.dirs import identical_directories
    from sif.report_compare import write_dir_groups
    from sif.walk import WalkOptions

    opts = {**filters, "include": tuple(filters["include"]), "exclude": tuple(filters["exclude"])}
    found = identical_directories(
        roots, groups, match_names=match_names, walk_options=WalkOptions(**opts), on_warning=warn
    )
    write_dir_groups(found, out, fmt)
