"""``sif fuzzysum``: the FuzzySum checksum of files (seed 2), its v2 variant, comparisons."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import BinaryIO

import click

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    check_paths,
    fail_cleanly,
    format_option,
    quiet_option,
)
from sif.core.fuzzystream import CHUNK, FuzzySum, FuzzySumV2
from sif.core.fuzzysum import V2_MATCH_THRESHOLD, V2_PREFIX, compare_v2, parse_v2
from sif.errors import InputError
from sif.events import ScanWarning, display_path
from sif.fileio import open_regular_file, refuse_device
from sif.report import json_line

VARIANTS = ("v1", "v2")
STDIN = "-"


@dataclass(frozen=True)
class KnownDigest:
    """One line of a list of known digests: a digest and the name it was made from."""

    digest: str
    name: str

    @property
    def variant(self) -> str:
        return "v2" if self.digest.startswith(V2_PREFIX) else "v1"


def score(a: str, b: str) -> int:
    """0-100: equal digests score 100; other v1 digests 0; v2 digests get a graded score."""
    if a == b:
        return 100
    if a.startswith(V2_PREFIX) and b.startswith(V2_PREFIX):
        return compare_v2(a, b)
    return 0


def parse_known(text: str, source: str) -> list[KnownDigest]:
    """The ``digest  name`` lines of a list made by ``sif fuzzysum`` (blank lines and ``#``
    comments skipped). InputError naming ``source`` and the line if a line is not one."""
    known = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, name = line.partition("  ")
        ok = bool(sep) and (
            (len(digest) == 32 and all(c in "0123456789abcdef" for c in digest)) or _is_v2(digest)
        )
        if not ok:
            raise InputError(f"{source}: line {number}: not a 'digest  name' line: {line[:80]!r}")
        known.append(KnownDigest(digest, name))
    return known


def _is_v2(digest: str) -> bool:
    try:
        parse_v2(digest)
    except ValueError:
        return False
    return True


def _digests_of(path: str, variants: list[str], warn: WarningCounter) -> dict[str, str] | None:
    """The digests of ``path`` (``-``: stdin) in ``variants``, read in chunks (memory bounded);
    None after a warning if it is unreadable or not a regular file (a FIFO, a device)."""
    hashers = {v: FuzzySum() if v == "v1" else FuzzySumV2() for v in variants}
    try:
        if path == STDIN:
            _feed(sys.stdin.buffer, hashers)
        else:
            handle, _ = open_regular_file(path)
            with handle:
                _feed(handle, hashers)
    except OSError as exc:
        warn(ScanWarning(path, exc.strerror or str(exc)))
        return None
    return {v: h.hexdigest() for v, h in hashers.items()}


def _feed(handle: BinaryIO, hashers: dict[str, FuzzySum | FuzzySumV2]) -> None:
    while chunk := handle.read(CHUNK):
        for hasher in hashers.values():
            hasher.update(chunk)


def _emit(text: str, obj: dict[str, object], fmt: str) -> None:
    out = sys.stdout.buffer
    out.write(json_line(obj) if fmt == "json" else text.encode("utf-8") + b"\n")


@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=str, readable=False, allow_dash=True))
@click.option(
    "--variant",
    type=click.Choice(VARIANTS),
    help="v1: the original FuzzySum (the default for digests); "
    "v2: content-defined chunks, comparable with a score (the default for --compare).",
)
@click.option(
    "--compare",
    nargs=2,
    metavar="A B",
    type=click.Path(path_type=str, allow_dash=True),
    help="Compare two files: a score from 0 to 100.",
)
@click.option(
    "-m",
    "--match",
    "known_list",
    type=click.Path(path_type=str, dir_okay=False, allow_dash=True),
    help="Match FILES against a list of known digests (the output of sif fuzzysum).",
)
@click.option(
    "-t",
    "--threshold",
    type=click.IntRange(0, 100),
    default=V2_MATCH_THRESHOLD,
    show_default=True,
    help="Lowest score that is a match (v2; v1 digests match only when equal).",
)
@format_option("text", "json")
@quiet_option
@fail_cleanly
def fuzzysum(
    files: tuple[str, ...],
    variant: str | None,
    compare: tuple[str, str] | None,
    known_list: str | None,
    threshold: int,
    fmt: str,
    quiet: bool,
) -> None:
    """Fuzzy checksums of text FILES, printed as 'digest  path' like md5sum ('-': stdin).

    v1 is Nick Johnson's FuzzySum, bit for bit: words become points (vowel and consonant
    sums, rounded to 17), the distances between points are averaged over blocks of 11 words
    and the averages go into MD5. It survives some spelling changes, but a word added or
    removed changes it. v2 ('v2:LEVEL:PIECES:PIECES') cuts the words into chunks at
    content-defined boundaries and gives one character per chunk, so a small edit changes
    a character or two and two digests can be compared: --compare A B prints the score
    (0-100) and the paths, -m LIST prints each FILE that matches a digest of LIST, with the
    score. A score at or above --threshold is a match.

    Files are read as bytes and decoded as UTF-8, malformed bytes replaced as Java does,
    in chunks: memory does not grow with the file. FIFOs and devices are refused.

    Exit status: 0 done, 1 done with warnings (unreadable or special files), 2 usage error, 3 fatal
    error (an unusable digest list).
    """
    check_paths(files + (compare or ()), "FILE")
    warn = WarningCounter(quiet)
    if compare is not None:
        if files or known_list:
            raise click.UsageError("--compare A B takes no FILE and no --match")
        _compare(compare, variant or "v2", threshold, fmt, warn)
    elif known_list is not None:
        if not files:
            raise click.UsageError("--match LIST needs FILE arguments to match")
        if known_list == STDIN and STDIN in files:
            raise click.UsageError("stdin cannot be both the list and a FILE")
        _match(files, known_list, threshold, fmt, warn)
    else:
        _digests(files or (STDIN,), variant or "v1", fmt, warn)
    sys.stdout.flush()
    sys.exit(EXIT_WARNINGS if warn.count else EXIT_OK)


def _digests(files: tuple[str, ...], variant: str, fmt: str, warn: WarningCounter) -> None:
    for path in files:
        digests = _digests_of(path, [variant], warn)
        if digests is None:
            continue
        digest = digests[variant]
        _emit(
            f"{digest}  {display_path(path)}",
            {"path": path, "variant": variant, "digest": digest},
            fmt,
        )


def _compare(
    pair: tuple[str, str], variant: str, threshold: int, fmt: str, warn: WarningCounter
) -> None:
    digests = [_digests_of(path, [variant], warn) for path in pair]
    if digests[0] is None or digests[1] is None:
        return
    a, b = digests[0][variant], digests[1][variant]
    value = score(a, b)
    _emit(
        f"{value}  {display_path(pair[0])}  {display_path(pair[1])}",
        {
            "a": pair[0],
            "b": pair[1],
            "variant": variant,
            "score": value,
            "match": value >= threshold,
            "threshold": threshold,
            "digest_a": a,
            "digest_b": b,
        },
        fmt,
    )


def _match(
    files: tuple[str, ...], known_list: str, threshold: int, fmt: str, warn: WarningCounter
) -> None:
    try:
        if known_list == STDIN:
            refuse_device(sys.stdin.fileno(), "standard input")
            raw = sys.stdin.buffer.read()
        else:
            with open(known_list, "rb") as handle:
                refuse_device(handle.fileno(), display_path(known_list))
                raw = handle.read()
    except OSError as exc:
        raise InputError(f"{display_path(known_list)}: {exc.strerror or exc}") from exc
    known = parse_known(raw.decode("utf-8", errors="surrogateescape"), display_path(known_list))
    variants = sorted({k.variant for k in known})
    for path in files:
        mine = _digests_of(path, variants, warn)
        if mine is None:
            continue
        for entry in known:
            value = score(mine[entry.variant], entry.digest)
            if value < threshold or (entry.variant == "v1" and value < 100):
                continue
            _emit(
                f"{display_path(path)} matches {display_path(entry.name)} ({value})",
                {
                    "path": path,
                    "match": entry.name,
                    "score": value,
                    "digest": mine[entry.variant],
                    "known_digest": entry.digest,
                },
                fmt,
            )
