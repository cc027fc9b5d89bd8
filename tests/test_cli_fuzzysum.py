"""``sif fuzzysum``, run in-process on real files."""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

from sif.cli import main
from sif.core.fuzzysum import V2_MATCH_THRESHOLD, checksum, checksum_v2, compare_v2

CONFORMANCE = pathlib.Path(__file__).resolve().parent / "data" / "fuzzysum" / "conformance"
WORDS = [
    "the",
    "harbor",
    "sailor",
    "quietly",
    "mended",
    "every",
    "patient",
    "violin",
    "during",
    "northern",
    "winter",
    "while",
    "ancient",
    "painters",
    "crossed",
    "rusty",
    "bridges",
    "beside",
    "lonely",
    "orchards",
    "and",
    "bold",
    "teachers",
    "shouted",
    "across",
    "velvet",
    "kitchens",
    "into",
    "shadows",
    "of",
    "distant",
    "mountains",
]


def prose(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["fuzzysum", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_every_public_vector_through_the_command() -> None:
    expected = dict(
        reversed(line.split("\t"))
        for line in (CONFORMANCE / "expected.tsv").read_text().splitlines()
    )
    paths = [str(CONFORMANCE / "inputs" / name) for name in sorted(expected)]
    code, out, _ = run(*paths)
    assert code == 0
    got = {
        pathlib.Path(path).name: digest
        for digest, path in (line.split("  ") for line in out.splitlines())
    }
    assert got == expected


def test_prints_digest_and_path_like_md5sum(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text(prose(1))
    code, out, err = run(str(a))
    assert (code, err) == (0, "")
    assert out == f"{checksum(prose(1))}  {a}\n"


def test_stdin_is_dash_and_the_default(tmp_path: pathlib.Path) -> None:
    data = prose(2).encode()
    assert run("-", stdin=data)[1] == f"{checksum(prose(2))}  -\n"
    assert run(stdin=data)[1] == f"{checksum(prose(2))}  -\n"


def test_malformed_utf8_is_decoded_as_java_does(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "bad.txt"
    a.write_bytes(prose(3).encode().replace(b" ", b" \xed\xa0\x80", 5) + b"\xff")
    expected = checksum(a.read_bytes().decode("utf-8", errors="replace"))
    assert run(str(a))[1].split("  ")[0] == expected


def test_unreadable_file_is_a_warning_and_the_others_go_on(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text(prose(4))
    code, out, err = run(str(tmp_path), str(a))
    assert code == 1
    assert out == f"{checksum(prose(4))}  {a}\n"
    assert f"{tmp_path}: not a regular file (directory)" in err
    missing = tmp_path / "missing.txt"  # a FILE that does not exist: a usage error, no work
    code, out, err = run(str(missing), str(a))
    assert code == 2 and out == ""
    assert f"FILE {missing}: no such file or directory" in err


def test_undecodable_name_is_escaped(tmp_path: pathlib.Path) -> None:
    raw = os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")
    with open(raw, "wb") as handle:
        handle.write(prose(5).encode())
    code, out, _ = run(os.fsdecode(raw))
    assert code == 0
    assert out.endswith("caf\\xe9.txt'\n") and "$'" in out


def test_json_lines(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text(prose(6))
    code, out, _ = run("--format", "json", "--variant", "v2", str(a))
    assert code == 0
    assert json.loads(out) == {"path": str(a), "variant": "v2", "digest": checksum_v2(prose(6))}


def test_compare_scores_an_edit_as_a_match_and_unrelated_texts_not(tmp_path: pathlib.Path) -> None:
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text(prose(7))
    b.write_text(prose(7).replace(" ", " winter ", 1))
    c.write_text(prose(8))
    code, out, _ = run("--compare", str(a), str(b))
    score = compare_v2(checksum_v2(a.read_text()), checksum_v2(b.read_text()))
    assert (code, out) == (0, f"{score}  {a}  {b}\n")
    assert score >= V2_MATCH_THRESHOLD
    code, out, _ = run("--compare", str(a), str(c), "--format", "json")
    record = json.loads(out)
    assert record["match"] is False and record["score"] < V2_MATCH_THRESHOLD


def test_compare_v1_is_all_or_nothing(tmp_path: pathlib.Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(prose(9))
    b.write_text(prose(9).upper())  # v1 ignores case
    assert run("--variant", "v1", "--compare", str(a), str(b))[1].startswith("100  ")


def test_match_against_a_list_of_known_digests(tmp_path: pathlib.Path) -> None:
    known = []
    for seed in (10, 11):
        path = tmp_path / f"known{seed}.txt"
        path.write_text(prose(seed))
        known.append(path)
    listing = tmp_path / "known.list"
    listing.write_text(run("--variant", "v2", *map(str, known))[1])
    edited, other = tmp_path / "edited.txt", tmp_path / "other.txt"
    edited.write_text(prose(10).replace("harbor", "harbour", 1))
    other.write_text(prose(12))
    code, out, _ = run("-m", str(listing), str(edited), str(other))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{edited} matches {known[0]} (")


def test_match_with_v1_digests_needs_equality(tmp_path: pathlib.Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text(prose(13))
    listing = tmp_path / "known.list"
    listing.write_text(f"{checksum(prose(13))}  original\n{checksum(prose(14))}  unrelated\n")
    code, out, _ = run("-m", str(listing), "--format", "json", str(a))
    assert code == 0
    assert [json.loads(line)["match"] for line in out.splitlines()] == ["original"]


def test_bad_digest_list_is_fatal(tmp_path: pathlib.Path) -> None:
    listing = tmp_path / "known.list"
    listing.write_text("not a digest line\n")
    a = tmp_path / "a.txt"
    a.write_text(prose(15))
    code, _, err = run("-m", str(listing), str(a))
    assert code == 3
    assert "line 1" in err
    code, _, err = run("-m", str(tmp_path / "nope.list"), str(a))
    assert code == 3


@pytest.mark.parametrize(
    "args",
    [("--compare", "a", "b", "c"), ("--variant", "v3", "x"), ("-t", "101", "-m", "x", "y")],
)
def test_usage_errors(args: tuple[str, ...]) -> None:
    assert run(*args)[0] == 2


# --- issue 10: FIFOs and devices, identical short texts, bounded memory ------------------


def _sif(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", "fuzzysum", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_fifo_and_device_are_refused_not_read(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    good = tmp_path / "a.txt"
    good.write_text(prose(8))
    done = _sif(str(fifo), "/dev/zero", str(good), timeout=30)  # used to hang, or read forever
    assert done.returncode == 1
    assert done.stdout == f"{checksum(prose(8))}  {good}\n"
    assert done.stderr.splitlines() == [
        f"sif: warning: {fifo}: not a regular file (FIFO)",
        "sif: warning: /dev/zero: not a regular file (character device)",
    ]
    done = _sif("--compare", str(fifo), str(good), timeout=30)
    assert done.returncode == 1 and done.stdout == "" and "(FIFO)" in done.stderr


@pytest.mark.parametrize("variant", ["v1", "v2"])
def test_identical_short_texts_compare_100(tmp_path: pathlib.Path, variant: str) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("a few words only\n")
    b.write_text("a few words only\n")
    code, out, _ = run("--compare", str(a), str(b), "--variant", variant)
    assert code == 0 and out == f"100  {a}  {b}\n"
    assert compare_v2(checksum_v2("a few words"), checksum_v2("a few words")) == 100


_PEAK = """
import sys
from sif.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
# VmHWM: this process's own peak (ru_maxrss would carry the parent's over fork and exec).
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print(peak, code, file=sys.stderr)
"""


def _peak_kib(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, "fuzzysum", *args], capture_output=True, text=True
    )
    peak, code = done.stderr.split()[-2:]
    assert code == "0", done.stderr
    return int(peak), done.stdout


def test_memory_does_not_grow_with_the_file(tmp_path: pathlib.Path) -> None:
    import numpy as np

    rng = np.random.default_rng(5)
    letters = rng.integers(92, 123, 24 << 20, dtype=np.uint8)
    letters[letters < 97] = 32  # words of about five letters
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_bytes(letters.tobytes())
    small.write_bytes(letters[: 1 << 20].tobytes())
    del letters
    # One list with a digest of each variant: both are made in one pass over each file.
    known = tmp_path / "known"
    known.write_text(f"{'0' * 32}  x\nv2:2:AAAAAAAA:AAAA  y\n")
    base, _ = _peak_kib("-m", str(known), "-t", "100", str(small))
    peak, _ = _peak_kib("-m", str(known), "-t", "100", str(big))
    # The old code held the text, its bytes and arrays over them: 15-35 times the file.
    assert peak - base < 32 << 10, (base, peak)  # KiB
