"""``sif anchors learn`` run in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

from sif.cli.anchors import anchors
from sif.fingerprint import fingerprint, load_anchors

SYLLABLES = b"the and na tion ma king of a ring to sta thing un der pro gram file sys tem".split()
WORDS = [a + b for a in SYLLABLES for b in SYLLABLES]


def write_tree(root: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(8):
        words = rng.integers(0, len(WORDS), 20_000)
        (root / f"doc{i}.txt").write_bytes(b" ".join(WORDS[j] for j in words))


def test_learn_writes_a_usable_anchor_file(tmp_path: Path) -> None:
    write_tree(tmp_path)
    out = tmp_path / "set.json"
    result = CliRunner().invoke(anchors, ["learn", str(tmp_path), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    learned = load_anchors(out)
    assert learned.length == 4
    data = (tmp_path / "doc0.txt").read_bytes()
    assert len(fingerprint(data, "anchors", anchors=learned)) > 100


def test_learn_takes_length_and_density(tmp_path: Path) -> None:
    write_tree(tmp_path)
    out = tmp_path / "set.json"
    args = ["learn", str(tmp_path), "-o", str(out), "--length", "5", "--density", "1/512"]
    result = CliRunner().invoke(anchors, args)
    assert result.exit_code == 0, result.output
    assert "anchors learned from 8 files" in result.output
    assert load_anchors(out).length == 5


def test_bad_density_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        anchors, ["learn", str(tmp_path), "-o", str(tmp_path / "x"), "--density", "3"]
    )
    assert result.exit_code == 2


def test_no_text_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "zeros").write_bytes(b"\0" * 10_000)
    result = CliRunner().invoke(anchors, ["learn", str(tmp_path), "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "no sample text" in result.output
