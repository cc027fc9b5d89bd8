"""Content views in the index and the query: archive members, compressed files, views kept apart."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sif.cli import main
from sif.content import ContentOptions
from sif.errors import IndexParamsMismatch
from sif.fingerprint import fingerprint, make_params
from sif.index import ParamSet, build_index, open_reader, scan_entries
from sif.index.build import DEFAULT_PARAMS
from sif.normalizers import strip_postscript
from sif.query import query_files
from treeutil import write

DATA = Path(__file__).parent.parent / "data" / "content"


def text(seed: int, n: int = 20_000) -> bytes:
    words = np.array([b"alpha", b"beta", b"gamma", b"delta", b"omega", b"sigma", b"kappa"])
    rng = np.random.default_rng(seed)
    return b" ".join(words[rng.integers(0, len(words), n // 5)].tolist())[:n]


def make_tree(root: Path) -> dict[str, Path]:
    """A zip made by zip(1), a gzip file made by gzip(1), a PostScript pair, plain files."""
    t = root / "t"
    write(t / "src" / "x.txt", text(1))
    write(t / "src" / "y.txt", text(2))
    subprocess.run(["zip", "-q", "-r", "../a.zip", "."], cwd=t / "src", check=True)
    shutil.rmtree(t / "src")
    write(t / "doc.txt", text(3))
    subprocess.run(["gzip", "-n", str(t / "doc.txt")], check=True)
    shutil.copy(DATA / "ps-a.ps", t / "ps-a.ps")
    shutil.copy(DATA / "ps-b.ps", t / "ps-b.ps")
    # The pages of ps-a as a plain text file: the same fingerprints in another view.
    write(t / "pages.txt", strip_postscript((DATA / "ps-a.ps").read_bytes()))
    write(t / "other.txt", text(4))
    return {"zip": t / "a.zip", "gz": t / "doc.txt.gz", "t": t}


def paths(result: object) -> list[str]:
    return [m.path for m in result.matches]  # type: ignore[attr-defined]


def test_members_and_decompressed_content_are_found(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    build_index([tree["t"]], tmp_path / "idx", jobs=1)
    reader = open_reader(tmp_path / "idx")
    assert reader.parameter_sets() == [ParamSet(DEFAULT_PARAMS, "auto")]
    write(tmp_path / "q" / "x.txt", text(1))
    write(tmp_path / "q" / "doc.txt", text(3))
    [x] = query_files([tmp_path / "q" / "x.txt"], reader, threshold=50)
    assert paths(x) == [f"{tree['zip']}!/x.txt"] and x.matches[0].exact
    [doc] = query_files([tmp_path / "q" / "doc.txt"], reader, threshold=50)
    assert paths(doc) == [str(tree["gz"])] and doc.matches[0].exact  # decompressed content
    # The archive as a query: one result per member, the member itself left out.
    results = list(query_files([tree["zip"]], reader, threshold=50))
    assert [r.path for r in results] == [f"{tree['zip']}!/x.txt", f"{tree['zip']}!/y.txt"]
    assert all(r.matches == () for r in results)


def test_postscript_prolog_and_views_never_mixed(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    idx = tmp_path / "idx"
    build_index([tree["t"]], idx, content=ContentOptions(normalize="raw"), jobs=1)
    build_index([tree["t"]], idx, jobs=1)  # auto, beside
    reader = open_reader(idx)
    ps_a, ps_b, pages = (str(tree["t"] / n) for n in ("ps-a.ps", "ps-b.ps", "pages.txt"))
    # Raw: the shared prolog makes the pair look similar (measured 33% in test_content).
    [raw] = query_files([ps_a], reader, normalize="raw", threshold=10, by="containment")
    assert ps_b in paths(raw)
    # Auto: the prolog is left out, and the page text in a plain file (identical
    # fingerprints, another view) is never compared with the PostScript view.
    [auto] = query_files([ps_a], reader, normalize="auto", threshold=5, by="containment")
    assert auto.view == "postscript" and paths(auto) == []
    [plain] = query_files([pages], reader, normalize="auto", threshold=5)
    assert ps_a not in paths(plain)
    with pytest.raises(IndexParamsMismatch, match="asked: normalize=markup"):
        list(query_files([ps_a], reader, normalize="markup"))


def test_changed_archive_is_read_again_whole(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    idx = tmp_path / "idx"
    build_index([tree["t"]], idx, jobs=1)
    with tarfile.open(tree["t"] / "b.tar", "w") as tar:  # a new archive
        for name, seed in (("m/one.txt", 5), ("m/two.txt", 6)):
            data = text(seed)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    work = tmp_path / "work"
    write(work / "x.txt", text(7))  # x.txt replaced, y.txt removed, z.txt added
    write(work / "z.txt", text(2))
    os.unlink(tree["zip"])
    subprocess.run(["zip", "-q", "-r", str(tree["zip"]), "."], cwd=work, check=True)
    stats = build_index([tree["t"]], idx, jobs=1)
    assert (stats.new, stats.changed, stats.unchanged) == (1, 1, 5)
    assert sorted(stats.read_paths) == sorted([str(tree["zip"]), str(tree["t"] / "b.tar")])
    reader = open_reader(idx)
    write(tmp_path / "q" / "y.txt", text(2))
    write(tmp_path / "q" / "x.txt", text(1))
    [y] = query_files([tmp_path / "q" / "y.txt"], reader, threshold=50)
    assert paths(y) == [f"{tree['zip']}!/z.txt"]  # the old y.txt entry is gone
    [x] = query_files([tmp_path / "q" / "x.txt"], reader, threshold=50)
    assert paths(x) == []
    write(tmp_path / "q" / "one.txt", text(5))
    [one] = query_files([tmp_path / "q" / "one.txt"], reader, threshold=50)
    assert paths(one) == [f"{tree['t'] / 'b.tar'}!/m/one.txt"]


def test_streamed_member_has_the_fingerprints_of_its_bytes(tmp_path: Path) -> None:
    data = text(8, 300_000)
    with gzip.open(tmp_path / "big.tar.gz", "wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("big.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    small = ContentOptions(max_entry_bytes=8192)  # larger members are streamed, not held
    [e] = scan_entries(tmp_path / "big.tar.gz", make_params(), None, small, windows=True)
    assert e.path.endswith("big.tar.gz!/big.txt") and e.scan.size == len(data)
    from sif.index import fold32

    assert np.array_equal(e.scan.fingerprints, fold32(fingerprint(data)))


def test_cli_index_and_query_options(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    idx = str(tmp_path / "idx")
    runner = CliRunner()
    r = runner.invoke(main, ["index", "--index", idx, "-j", "1", "--raw", str(tree["t"])])
    assert r.exit_code == 0, r.output
    write(tmp_path / "x.txt", text(1))
    r = runner.invoke(main, ["query", "--index", idx, str(tmp_path / "x.txt")])
    assert r.exit_code == 0 and "a.zip!/" not in r.output  # raw: the zip is one file
    r = runner.invoke(main, ["index", "--index", idx, "-j", "1", str(tree["t"])])
    assert r.exit_code == 0  # the last run's --raw again: nothing new
    assert "0 new" in r.stderr
    r = runner.invoke(
        main, ["index", "--index", idx, "-j", "1", "--normalize", "auto", str(tree["t"])]
    )
    assert r.exit_code == 0
    r = runner.invoke(main, ["query", "--index", idx, str(tmp_path / "x.txt")])
    assert f"{tree['zip']}!/x.txt" in r.stdout
    r = runner.invoke(main, ["query", "--index", idx, "--raw", "--normalize", "code", "x"])
    assert r.exit_code == 2 and "not both" in r.stderr
