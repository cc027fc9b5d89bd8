"""``sif similar``: all groups of similar files under PATHS (all-against-all)."""

from __future__ import annotations

import sys
from typing import Any

import click

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    check_output_file,
    collect_roots,
    fail_cleanly,
    format_option,
    jobs_option,
    make_progress,
    quiet_option,
    report_output,
    walk_options,
)
from sif.cli.index_options import (
    content_options,
    engine_options,
    fingerprint_options,
    from_last_run,
    index_option,
    make_engine,
    normalize_from_options,
    params_from_options,
)
from sif.outfile import written
from sif.similar import DEFAULT_MAX_DF, DEFAULT_MEMORY_LIMIT, DEFAULT_MIN_SHARED


def _a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """``value``, unless it is NaN, which every range check lets through (``--size-ratio
    nan`` paired nothing, without a word)."""
    if value is not None and value != value:
        raise click.BadParameter("not a number", ctx, param)
    return value


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str, readable=False))
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 100),
    default=25.0,
    show_default=True,
    help="Least similarity, in percent: how much of the smaller file the larger holds.",
)
@click.option(
    "--max-df",
    type=click.IntRange(2),
    default=DEFAULT_MAX_DF,
    show_default=True,
    help="Stop-fingerprints: a fingerprint in more files than this creates no pairs.",
)
@click.option(
    "--min-shared",
    type=click.IntRange(1),
    default=DEFAULT_MIN_SHARED,
    show_default=True,
    help="Least number of distinct shared fingerprints (the paper: 5-10 for strong evidence).",
)
@click.option(
    "--size-ratio",
    type=click.FloatRange(1),
    callback=lambda ctx, param, v: _a_number(ctx, param, v),
    help="Skip pairs whose sizes differ by more than this factor.",
)
@click.option("--same-suffix", is_flag=True, help="Pair only files with the same suffix.")
@click.option(
    "--fast",
    is_flag=True,
    help="Compare -t with the sampled estimate (no file read again), shown with its "
    "90% interval; no search for small files held by others that share no "
    "fingerprint with them; measured error in the README.",
)
@click.option("--exact", is_flag=True, hidden=True, help="The default (kept for old scripts).")
@click.option(
    "--sets",
    type=click.Choice(["cliques", "components"]),
    help="Interesting sets instead of groups: pairwise-similar cliques, or components.",
)
@click.option(
    "--by",
    type=click.Choice(["score", "percent"]),
    default="score",
    show_default=True,
    help="What the text report shows beside each file: the score -t was compared with, "
    "or the paper's percentage (json and csv give both).",
)
@click.option(
    "--dirs",
    is_flag=True,
    help="Pairs of directories instead of files: both directories have at least -t "
    "percent of their bytes in the other (a parent pair stands for its children's).",
)
@click.option("--wait", is_flag=True, help="Wait while another process writes the index.")
@click.option(
    "--memory-limit",
    show_default=DEFAULT_MEMORY_LIMIT,
    help="DuckDB's memory for the collation; it spills to disk beyond. With --engine "
    "dask: memory per worker, half of it DuckDB's [default: the machine's shared out].",
)
@index_option
@fingerprint_options
@content_options
@jobs_option
@engine_options
@walk_options
@format_option("text", "json", "csv", "html")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the report to this file instead of stdout (html: one self-contained page).",
)
@quiet_option
@fail_cleanly
def similar(
    paths: tuple[str, ...],
    threshold: float,
    max_df: int,
    min_shared: int,
    size_ratio: float | None,
    same_suffix: bool,
    fast: bool,
    exact: bool,
    sets: str | None,
    by: str,
    dirs: bool,
    wait: bool,
    memory_limit: str | None,
    index: str | None,
    scheme: str | None,
    anchors_file: str | None,
    window: int | None,
    k: int | None,
    min_fingerprints: int | None,
    normalize: str | None,
    raw: bool,
    jobs: int | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    from_file: Any,
    null: bool,
    fmt: str,
    output: str | None,
    quiet: bool,
    **filters: Any,
) -> None:
    """All groups of similar files under PATHS (the paper's section 4).

    Fingerprints come through the index (a second run reads only changed
    files); the collated pair counts are kept in it, so a new threshold or
    filter right after a run opens no file. Files of different kinds (text,
    binary) are never compared. The score compared with -t is how much of the
    smaller file the larger holds, exact over all 50-byte windows: the
    fingerprints choose the candidates, then both files are read (each once).
    --fast compares the sampled estimate instead; an estimate is shown as
    ~N [low-high]. The text report shows that score beside each file
    (--by percent: the paper's percentage, which can exceed 100). --sets gives
    text or json (one set a line); csv lists pairs and refuses --sets. A
    second writer of the index fails with "index in use", or waits with --wait.
    --engine dask fingerprints and collates on a Dask cluster (see sif index),
    with the same results.

    Exit status: 0 done, 1 done with warnings, 2 usage error, 3 fatal error.
    """
    from sif.content import ContentOptions
    from sif.index import default_index_path
    from sif.report import human_size, write_similar
    from sif.similar import SimilarOptions, find_similar
    from sif.walk import WalkOptions

    if fast and exact:
        raise click.UsageError("--fast and --exact exclude each other (exact is the default)")
    if sets is not None and fmt == "csv":
        raise click.UsageError(
            "--sets has no csv form (csv lists pairs): use --format text or json with --sets"
        )
    if output is not None:
        from sif.index.store import default_index_path

        check_output_file(output, index=index or default_index_path())
    if dirs and sets is not None:
        raise click.UsageError("--dirs lists pairs of directories: it takes no --sets")
    if dirs and fmt == "html":
        raise click.UsageError("--dirs has no html form: use --format text, json or csv")
    warnings = WarningCounter(quiet)
    roots = collect_roots(paths, from_file, null, warnings)
    filters["include"] = tuple(filters["include"])
    filters["exclude"] = tuple(filters["exclude"])
    walk = WalkOptions(**filters)
    options = SimilarOptions(
        threshold=threshold,
        max_df=max_df,
        min_shared=min_shared,
        size_ratio=size_ratio,
        same_suffix=same_suffix,
        exact=not fast,
        sets=sets,
    )
    params, anchors = params_from_options(scheme, anchors_file, window, k, min_fingerprints)
    mode = normalize_from_options(normalize, raw)
    location = index or default_index_path()
    params, anchors, mode = from_last_run(location, params, anchors, mode)
    runner = make_engine(engine, scheduler, workers, memory_limit)
    progress = make_progress(quiet)
    try:
        result = find_similar(
            roots,
            location,
            params,
            anchors,
            options=options,
            walk=walk,
            jobs=jobs,
            memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT,
            content=ContentOptions(normalize=mode) if mode else None,
            wait=wait,
            on_warning=warnings,
            progress=progress,
            engine=runner,
        )
    finally:
        if progress is not None:
            progress.close()
        if runner is not None:
            runner.close()
    if dirs:
        from sif.compare.dirs import similar_directories
        from sif.report_compare import write_dir_pairs

        pairs = similar_directories(result.pairs, roots, threshold, walk_options=walk)
        if output is not None:
            with written(output) as f:
                write_dir_pairs(pairs, f, fmt)
        else:
            with report_output() as out:
                write_dir_pairs(pairs, out, fmt)
    elif fmt == "html":
        from sif.html import explainer, write_page
        from sif.html.report import similar_report

        write_page(similar_report(result, roots, explainer(mode), _note), output)
    elif output is not None:
        with written(output) as f:
            write_similar(result, f, fmt, by)
    else:
        with report_output() as out:
            write_similar(result, out, fmt, by)
    s = result.stats
    if not quiet:
        idx = s.index
        read = f"{idx.files_read:,} files read ({human_size(idx.bytes_read)})" if idx else ""
        how = "reused stored pairs" if s.reused else f"{s.fingerprints:,} fingerprints collated"
        exact_note = (
            f"; {s.exact_pairs:,} pairs scored exactly ({s.exact_files_read:,} files, "
            f"{human_size(s.exact_bytes_read)} read, {s.seconds_exact:.2f} s"
            + (
                f"; {s.sampled_pairs:,} pairs of large files on a window sample"
                if s.sampled_pairs
                else ""
            )
            + ")"
            if options.exact or s.exact_pairs  # pairs of small files: scored in every run
            else ""
        )
        if s.small_files:
            exact_note += (
                f"; {s.small_files:,} small files looked for in all others "
                f"({s.small_candidates:,} pairs found, {human_size(s.small_bytes_read)} read, "
                f"{s.seconds_small:.2f} s)"
            )
        if s.estimated:
            exact_note += f"; {s.estimated:,} scores are estimates (~)"
            if s.sampled:
                exact_note += f", {s.sampled:,} of them on a window sample (within 1 point)"
            if s.exact_changed:
                exact_note += f", {s.exact_changed:,} files changed since indexed"
        made = f"{len(result.sets):,} sets" if sets else f"{len(result.groups):,} groups"
        click.echo(
            f"sif: {s.files:,} files, {read}; {how}, {s.stopped:,} stop-fingerprints "
            f"(in more than {max_df} files); {s.pairs_collated:,} pairs sharing fingerprints, "
            f"{s.pairs:,} similar, {made}{exact_note}; {warnings.count} warnings, "
            f"{s.seconds:.2f} s; index {location}",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


def _note(message: str) -> None:
    click.echo(f"sif: note: {message}", err=True)
