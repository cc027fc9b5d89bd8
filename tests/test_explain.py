"""sif.explain: the exact shared passages of two files (library, real files on disk)."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sif
from explainutil import W, close, spliced
from sif.core.matches import runs, shared_windows, window_hashes_jit
from sif.core.rolling import window_hashes
from sif.errors import ConfigError
from sif.passages import explain_arrays
from sif.similar import exact_containment, window_set
from textgen import text
from treeutil import PRINT_PEAK_MIB


def test_spliced_passages_are_found_exactly_once_each_with_their_offsets(tmp_path: Path) -> None:
    a, b, expected = spliced(tmp_path)
    expl = sif.explain(a, b)
    assert len(expl.passages) == 3
    for want in expected:
        assert sum(close(p, want) for p in expl.passages) == 1, (want, expl.passages)
    da, db = a.read_bytes(), b.read_bytes()
    for p in expl.passages:
        assert da[p.a_start : p.a_end] == db[p.b_start : p.b_end]
        assert p.a_lines == (da.count(b"\n", 0, p.a_start) + 1, da.count(b"\n", 0, p.a_end - 1) + 1)
        assert p.b_lines == (db.count(b"\n", 0, p.b_start) + 1, db.count(b"\n", 0, p.b_end - 1) + 1)
    # The summary: the exact score's containments, the longest passage, coverage and gaps.
    ca, cb = exact_containment(window_set(da, W), window_set(db, W))
    assert (expl.a_in_b, expl.b_in_a) == (ca, cb)
    assert expl.longest is not None and expl.longest.length >= 2_500
    covered_b = sum(p.length for p in expl.passages)
    assert expl.b.covered == covered_b and expl.b.coverage == covered_b / len(db)
    assert expl.a.covered == sum(  # P1 twice in B is once in A
        p.length for p in {(p.a_start, p.a_end): p for p in expl.passages}.values()
    )
    assert len(expl.a.gaps) == 3 and len(expl.b.gaps) == 4
    assert sum(e - s for s, e in expl.b.gaps) == len(db) - covered_b


def test_unrelated_texts_share_no_passage_and_score_zero(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_bytes(text(1, 20_000))
    (tmp_path / "y.txt").write_bytes(text(2, 20_000))
    expl = sif.explain(tmp_path / "x.txt", tmp_path / "y.txt")
    assert expl.passages == () and expl.a_in_b == 0.0 and expl.b_in_a == 0.0
    assert expl.longest is None and expl.a.coverage == 0.0
    assert expl.a.gaps == ((0, 20_000),)


def test_a_small_memory_budget_gives_the_same_passages(tmp_path: Path) -> None:
    a, b, _ = spliced(tmp_path)
    da = np.frombuffer(a.read_bytes(), np.uint8)
    db = np.frombuffer(b.read_bytes(), np.uint8)
    big = explain_arrays(da, db, W)
    small = explain_arrays(da, db, W, budget=16 << 10)  # many groups of buckets
    assert big[1:] == small[1:]
    assert np.array_equal(big[0], small[0])


def test_compiled_window_values_are_those_of_window_hashes() -> None:
    data = np.frombuffer(text(5, 5_000) + bytes(range(256)), np.uint8)
    for w in (1, 8, 50):
        assert np.array_equal(window_hashes_jit(data, w), window_hashes(data, w))


@settings(max_examples=60, deadline=None)
@given(
    st.binary(min_size=0, max_size=400),
    st.binary(min_size=0, max_size=400),
    st.integers(2, 12),
    st.integers(0, 2),
)
def test_every_shared_window_lies_in_a_maximal_passage(
    x: bytes, y: bytes, w: int, alphabet: int
) -> None:
    # Few distinct bytes: many repeats and overlapping matches.
    if alphabet:
        x = bytes(c % (alphabet + 1) for c in x)
        y = bytes(c % (alphabet + 1) for c in y)
    a, b = np.frombuffer(x, np.uint8), np.frombuffer(y, np.uint8)
    rows, na, nb, common = explain_arrays(a, b, w, budget=1 << 12)
    sa, sb = window_set(a, w), window_set(b, w)
    assert (na, nb, common) == (len(sa), len(sb), len(np.intersect1d(sa, sb)))
    in_a = np.zeros(max(0, len(x) - w + 1), bool)
    in_b = np.zeros(max(0, len(y) - w + 1), bool)
    for s, t, n in rows.tolist():
        assert n >= w and x[s : s + n] == y[t : t + n]
        assert s == 0 or t == 0 or x[s - 1] != y[t - 1]  # maximal backwards
        assert s + n == len(x) or t + n == len(y) or x[s + n] != y[t + n]  # and forwards
        in_a[s : s + n - w + 1] = True
        in_b[t : t + n - w + 1] = True
    # window_set holds Karp-Rabin values, window_hashes their (bijective) mix: compare alike.
    sb_set, sa_set = set(window_hashes(b, w).tolist()), set(window_hashes(a, w).tolist())
    assert [v in sb_set for v in window_hashes(a, w).tolist()] == in_a.tolist()
    assert [v in sa_set for v in window_hashes(b, w).tolist()] == in_b.tolist()


def test_runs_of_a_repeated_byte_are_few() -> None:
    a, b = np.zeros(10_000, np.uint8), np.zeros(3_000, np.uint8)
    bits_a, _, na, nb, common = shared_windows(a, b, W)
    assert (na, nb, common) == (1, 1, 1)
    assert len(runs(a, b, bits_a, W)) == 4  # 9,951 windows of A against 2,951 of B


def test_archive_members_and_compressed_files_are_explained_as_their_content(
    tmp_path: Path,
) -> None:
    a, b, _ = spliced(tmp_path)
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        z.writestr("dir/b.txt", b.read_bytes())
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b.read_bytes()))
    plain = sif.explain(a, b)
    member = sif.explain(a, f"{tmp_path}/z.zip!/dir/b.txt")
    packed = sif.explain(a, tmp_path / "b.txt.gz")
    assert member.passages == plain.passages == packed.passages
    assert member.b.view == "raw" and member.b.mapped
    assert packed.b.view == "gzip" and packed.b.mapped
    with pytest.raises(ConfigError, match="no such member"):
        sif.explain(a, f"{tmp_path}/z.zip!/dir/nope.txt")


def test_a_normalised_view_says_it_keeps_no_map_to_the_lines(tmp_path: Path) -> None:
    body = text(9, 3_000).decode()
    (tmp_path / "a.html").write_text(f"<html><body><p>{body}</p></body></html>")
    (tmp_path / "b.html").write_text(f"<html><body><div class='x'>{body}</div></body></html>")
    expl = sif.explain(tmp_path / "a.html", tmp_path / "b.html", normalize="markup")
    assert expl.a.view == "markup" and not expl.a.mapped
    assert expl.a_in_b > 0.95 and len(expl.passages) == 1


def test_binary_files_share_passages_too(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    core = rng.integers(0, 256, 4_000, dtype=np.uint8).tobytes()
    (tmp_path / "x.bin").write_bytes(b"\0\1\2" + rng.bytes(1_000) + core)
    (tmp_path / "y.bin").write_bytes(core + b"\0\xff" + rng.bytes(500))
    expl = sif.explain(tmp_path / "x.bin", tmp_path / "y.bin")
    assert expl.a.kind == "binary"
    [p] = expl.passages
    assert (p.b_start, p.length, p.a_lines) == (0, 4_000, None)


def test_bad_inputs_are_config_errors_before_anything_is_read(tmp_path: Path) -> None:
    import os

    (tmp_path / "t.txt").write_bytes(text(1, 1_000))
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 4)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "d").mkdir()
    cases = {
        "nope": "no such file",
        "fifo": "a FIFO",
        "d": "is a directory",
        "b.bin": "only files of one kind",
    }
    for name, cause in cases.items():
        with pytest.raises(ConfigError, match=cause):
            sif.explain(tmp_path / "t.txt", tmp_path / name)


def test_large_inputs_take_the_two_pass_gathering_and_agree_with_small_groups() -> None:
    # 2 x 600 KB: 2^8 buckets, gathered by coarse region then refined; a 64 KB budget
    # takes them a few buckets at a time, in one pass each.
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, 600_000, dtype=np.uint8)
    b = np.concatenate((a[400_000:], rng.integers(0, 256, 1_000, dtype=np.uint8), a[:400_000]))
    b[123_456] ^= 1
    big = explain_arrays(a, b, W)
    small = explain_arrays(a, b, W, budget=64 << 10)
    assert np.array_equal(big[0], small[0]) and big[1:] == small[1:]
    sa, sb = window_set(a, W), window_set(b, W)
    assert big[1:] == (len(sa), len(sb), len(np.intersect1d(sa, sb)))
    # A's first 400 KB moved after the rest, one byte changed in the moved-up part.
    assert big[0].tolist() == [
        [0, 201_000, 400_000],
        [400_000, 0, 123_456],
        [523_457, 123_457, 76_543],
    ]


def test_a_file_cut_short_after_it_is_opened_is_compared_as_read_not_a_crash(
    tmp_path: Path,
) -> None:
    """A file truncated by another process while `sif explain` compares it: its bytes
    were mapped, and the first page past the new end ended the process with SIGBUS.
    Now they are read; the child here truncates the file inside the open content and
    then touches every byte (killed by SIGBUS before the change)."""
    import subprocess
    import sys

    f = tmp_path / "a.txt"
    f.write_bytes(text(1, 200_000))
    code = (
        "import os, sys\n"
        "from sif.passages import _opened\n"
        "with _opened(sys.argv[1], 'raw', lambda w: None) as c:\n"
        "    c.data  # read (it was mapped)\n"
        "    os.truncate(sys.argv[1], 0)\n"
        "    print(len(c.data), int(c.data.sum()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(f)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    data = np.frombuffer(text(1, 200_000), dtype=np.uint8)
    assert done.stdout.split() == [str(len(data)), str(int(data.sum()))]


@pytest.mark.parametrize("change", ["shorter", "longer"])
def test_a_file_that_changed_since_its_fstat_is_an_input_error_naming_it(
    tmp_path: Path, change: str
) -> None:
    import os

    from sif.errors import InputError
    from sif.passages import _read_whole

    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 10_000)
    fd = os.open(f, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if change == "shorter":
            os.truncate(f, 4_000)
        else:
            with open(f, "ab") as out:
                out.write(b"y")
        with pytest.raises(InputError, match=r"a\.txt: changed while it was read"):
            _read_whole(fd, st, str(f))
        os.lseek(fd, 0, os.SEEK_SET)
        assert bytes(_read_whole(fd, os.fstat(fd), str(f))) == f.read_bytes()
    finally:
        os.close(fd)


def test_a_file_listed_at_size_0_is_read_to_its_end() -> None:
    """/proc lists its files at size 0: explain reads what they hold, as before."""
    import os

    from sif.passages import _read_whole

    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        data = bytes(_read_whole(fd, os.fstat(fd), "/proc/self/status"))
    finally:
        os.close(fd)
    assert data.startswith(b"Name:")


def test_a_sys_file_is_read_as_what_it_holds_not_called_changed() -> None:
    """/sys lists 4096 bytes for a line: its fstat is the same once read, so it did not
    change (it was 'changed while it was read (4 bytes read, 4,096 listed)'; mapped,
    'No such device')."""
    import os

    from sif.passages import _read_whole

    path = "/sys/devices/system/cpu/online"  # sysfs, on any Linux (sif's platform)
    with open(path, "rb") as f:
        want = f.read()
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        assert st.st_size != len(want)  # the size it lists is not its content's
        assert bytes(_read_whole(fd, st, path)) == want
    finally:
        os.close(fd)


def test_files_of_two_kinds_are_refused_before_either_is_read_whole(tmp_path: Path) -> None:
    """A 2 GB binary file against a text file: the kinds differ, seen from their first
    bytes; read whole first, the binary took 2 GB and seconds before the same refusal
    (the peak of a child, VmHWM)."""
    import subprocess
    import sys

    big = tmp_path / "disk.img"
    with open(big, "wb") as f:
        f.write(b"\x7fELF\x00\x01" * 100)
        f.truncate(2 << 30)  # sparse
    (tmp_path / "a.txt").write_bytes(text(2, 5000))
    code = (
        "import sys\n"
        "from sif.errors import ConfigError\n"
        "from sif.passages import explain\n"
        "try:\n"
        "    explain(sys.argv[1], sys.argv[2])\n"
        "except ConfigError as e:\n"
        "    print(e)\n" + PRINT_PEAK_MIB
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(big), str(tmp_path / "a.txt")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    refusal, peak = done.stdout.splitlines()
    assert refusal.endswith("only files of one kind are compared"), refusal
    assert int(peak) < 500, peak
