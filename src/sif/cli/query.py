"""``sif query``: the indexed files similar to a file (one-against-all)."""

from __future__ import annotations

import gc
import os
import sys

import click

# sif does no linear algebra: OpenBLAS's thread pool, started when numpy loads, only
# costs start-up (about 30 ms of a cold `sif query`; measured with 2 cores). A user's
# setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sif.cli import common
from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    check_output_file,
    check_paths,
    fail_cleanly,
    format_option,
    quiet_option,
    report_output,
)
from sif.cli.index_options import (
    IndexAnchors,
    content_options,
    fingerprint_options,
    index_option,
    normalize_from_options,
    params_from_options,
    pick_anchor_set,
)
from sif.outfile import written


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str, readable=False))
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 100),
    default=50.0,
    show_default=True,
    help="Least score, in percent (0..100), of a file listed; with --by percent, "
    "whose figure can exceed 100, any such file passes.",
)
@click.option(
    "--by",
    type=click.Choice(["similarity", "containment", "percent"]),
    default="similarity",
    show_default=True,
    help="Score the threshold applies to: similarity (the share of FILE's windows "
    "found in the indexed file), containment (the larger of the two shares: the "
    "smaller file in the larger), or percent (the paper's figure).",
)
@click.option(
    "--fast",
    is_flag=True,
    help="Compare -t with the sampled estimate (no indexed file read), shown as ~N "
    "with its 90% interval; measured error in the README.",
)
@click.option(
    "--min-shared",
    type=click.IntRange(1),
    help="Least number of distinct shared fingerprints (default 2; 1 with --by percent).",
)
@index_option
@fingerprint_options
@content_options
@format_option("text", "json", "csv", "html")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the report to this file instead of stdout (html: one self-contained page).",
)
@quiet_option
@fail_cleanly
def query(
    files: tuple[str, ...],
    threshold: float,
    by: str,
    fast: bool,
    min_shared: int | None,
    index: str | None,
    scheme: str | None,
    anchors_file: str | None,
    window: int | None,
    k: int | None,
    min_fingerprints: int | None,
    normalize: str | None,
    raw: bool,
    fmt: str,
    output: str | None,
    quiet: bool,
) -> None:
    """The indexed files similar to each FILE (which need not be indexed).

    For each indexed file of the same kind and content view: the similarity
    (the share of FILE's 50-byte windows found in it, exact: the index picks
    the candidates, which are then read again; one that changed since it was
    indexed keeps its estimate, shown ~N), compared with -t; --fast compares
    the sampled estimate instead (every window of FILE is looked up, so edits
    do not bias it). In json and csv also the share of it found in FILE, the paper's
    percentage (FILE's fingerprints found in it, counted with multiplicity,
    so it can exceed 100) and whether it is an exact copy (same size and
    BLAKE3 digest: it scores 100; a FILE under the 50-byte window is matched by
    digest alone). Sizes are the files' on disk, with the content's where it
    differs (decompressed, an ELF's strings). An archive FILE is queried
    member by member. FILE itself
    is left out. --normalize/--raw must match a parameter set of the index.
    The index is read as last committed, even while 'sif index' writes it.

    Exit status: 0 done, 1 done with warnings, 2 usage error, 3 fatal error.
    """
    own = common.OWN_PROCESS
    if own:
        # The cyclic GC cost a cold query ~25 ms: passes over the objects its imports
        # make (numpy's, sif's: no garbage among them), then full collections of them
        # all while the interpreter shuts down. So the imports run without it, what
        # they leave is frozen (never traversed again), and so is everything at the end.
        gc.disable()
    try:
        from sif.index import open_reader
        from sif.query import query_files
        from sif.report import write_query
    finally:
        if own:
            gc.freeze()
            gc.enable()

    params, _ = params_from_options(scheme, anchors_file, window, k, min_fingerprints)
    mode = normalize_from_options(normalize, raw)
    check_paths(files, "FILE")
    if output is not None:
        from sif.index.store import default_index_path

        inputs = [f for f in files if f != "-"]
        check_output_file(output, inputs=inputs, index=index or default_index_path())
    warnings = WarningCounter(quiet)
    reader = open_reader(index)
    try:
        if isinstance(params, IndexAnchors):  # --scheme anchors alone: the index's one set
            params, _ = pick_anchor_set(reader, params, mode)
        results = query_files(
            files,
            reader,
            params,
            normalize=mode,
            threshold=threshold,
            by=by,
            min_shared=min_shared,
            exact=not fast,
            on_warning=warnings,
        )
        if fmt == "html":
            from sif.html import explainer, write_page
            from sif.html.report import query_report

            write_page(query_report(list(results), explainer(mode), _note), output)
        elif output is not None:
            with written(output) as f:
                write_query(results, f, fmt)
        else:
            with report_output() as out:
                write_query(results, out, fmt)
    finally:
        reader.close()
    if own:
        gc.freeze()  # the process ends here: no collection of what it leaves
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


def _note(message: str) -> None:
    click.echo(f"sif: note: {message}", err=True)
