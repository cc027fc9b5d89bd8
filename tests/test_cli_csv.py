"""csv reports write booleans as json does: true/false, never Python's True/False."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

from click.testing import CliRunner

from sif.cli import main
from treeutil import write


def prose(seed: int, words: int = 1500) -> bytes:
    rng = random.Random(seed)
    vocabulary = [f"w{rng.randrange(10**6)}" for _ in range(3000)]
    return " ".join(rng.choice(vocabulary) for _ in range(words)).encode()


def rows(args: list[str]) -> list[dict[str, str]]:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_similar_and_query_csv_booleans_are_true_false(tmp_path: Path) -> None:
    base = prose(1)
    write(tmp_path / "t/a.txt", base)
    write(tmp_path / "t/b.txt", base)  # an exact copy
    write(tmp_path / "t/c.txt", base[:6000] + prose(2)[:3000])  # similar, not identical
    index = str(tmp_path / "idx")
    pairs = rows(
        ["similar", "-q", "-j", "1", "--index", index, "--format", "csv", str(tmp_path / "t")]
    )
    assert len(pairs) == 3
    assert sorted(r["identical"] for r in pairs) == ["false", "false", "true"]
    write(tmp_path / "q.txt", base)
    matches = rows(["query", "-q", "--index", index, "--format", "csv", str(tmp_path / "q.txt")])
    exact = {Path(r["path"]).name: r["exact"] for r in matches}
    assert exact["a.txt"] == exact["b.txt"] == "true"
    assert exact.get("c.txt", "false") == "false"
