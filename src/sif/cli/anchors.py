"""``sif anchors learn``: learn an anchor set, the paper's first method (section 2)."""

from __future__ import annotations

import hashlib
from typing import Any

import click

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    check_output_file,
    collect_roots,
    fail_cleanly,
    quiet_option,
    size_option_value,
    walk_options,
)


def _density(ctx: click.Context, param: click.Parameter, value: str) -> float:
    # "1/256" reads like the paper; a plain fraction works too.
    try:
        if "/" in value:
            num, den = value.split("/", 1)
            result = float(num) / float(den)
        else:
            result = float(value)
    except (ValueError, ZeroDivisionError) as exc:
        raise click.BadParameter(f"{value!r} is not a fraction like 1/256") from exc
    if not 0 < result < 1:
        raise click.BadParameter("the density must be between 0 and 1")
    return result


@click.group()
def anchors() -> None:
    """Anchor sets for --scheme anchors (the paper's first method)."""


@anchors.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str, readable=False))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=str),
    help="Write the anchor set to this file (JSON).",
)
@click.option(
    "--length", type=click.IntRange(2, 8), default=4, show_default=True, help="Bytes per anchor."
)
@click.option(
    "--density",
    default="1/256",
    show_default=True,
    callback=_density,
    help="Target fingerprints per byte.",
)
@click.option(
    "--sample-size",
    default="32M",
    show_default=True,
    callback=size_option_value,
    help="Read at most this much text in all.",
)
@click.option(
    "--per-file",
    default="256K",
    show_default=True,
    callback=size_option_value,
    help="Read at most this much of each file.",
)
@walk_options
@quiet_option
@fail_cleanly
def learn(
    paths: tuple[str, ...],
    output: str,
    length: int,
    density: float,
    sample_size: int,
    per_file: int,
    from_file: Any,
    null: bool,
    quiet: bool,
    **filters: Any,
) -> None:
    """Learn anchors from the text files under PATHS and write them to FILE.

    Anchors are strings of LENGTH bytes that are "quite common but not too
    common" in the sample: held by several files, none carrying more than
    1/16 of the density, none overlapping another. Files are sampled in an
    order fixed by a hash of their path, so the set does not depend on the
    walk order; files with NUL bytes are skipped. Use the set with
    --scheme anchors --anchors FILE.

    Exit status: 0 done, 1 done with warnings, 2 usage error, 3 fatal error.
    """
    from sif.fingerprint import learn_anchors_from_files, save_anchors
    from sif.walk import Walker, WalkOptions

    check_output_file(output)
    roots = collect_roots(paths, from_file, null)
    warnings = WarningCounter(quiet)
    filters["include"] = tuple(filters["include"])
    filters["exclude"] = tuple(filters["exclude"])
    walker = Walker(WalkOptions(**filters), on_warning=warnings)
    records = sorted(
        walker.walk(roots),
        key=lambda r: hashlib.blake2b(r.path.encode("utf-8", "surrogateescape")).digest(),
    )
    taken = [0, 0]

    def count(n: int) -> None:
        taken[0] += 1
        taken[1] += n

    learned = learn_anchors_from_files(
        (r.path for r in records),
        length=length,
        density=density,
        sample_bytes=sample_size,
        per_file=per_file,
        on_warning=warnings,
        on_file=count,
    )
    save_anchors(learned, output)
    if not quiet:
        click.echo(
            f"sif: {len(learned.anchors)} anchors learned from {taken[0]:,} files "
            f"({taken[1]:,} bytes), one per {1 / learned.density:.0f} bytes on the sample, "
            f"written to {output}",
            err=True,
        )
    raise SystemExit(EXIT_WARNINGS if warnings.count else EXIT_OK)
