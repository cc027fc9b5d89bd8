"""numba's cache when sif runs as a user who can write neither its install nor a home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from treeutil import fill, write

# Needs root (as CI runs): it hands the run to nobody, who may not write this
# checkout (numba's in-tree cache) and has no home (numba's user-wide cache).
AS_NOBODY = r"""
import importlib, json, os, sys, tempfile
# Imported as root, the modules a run imports (listed by a run as root):
# nobody may not read this Python's own files.
for name in json.loads(open(sys.argv[4]).read()):
    if name in ("sif.core.kernels", "sif.core.jitcache"):
        continue  # numba's cache is chosen when these load: by nobody, below
    try:
        importlib.import_module(name)
    except Exception:
        pass
os.setgid(65534); os.setuid(65534)  # root writes everything: drop to nobody
os.environ["HOME"] = "/nonexistent"
os.environ.pop("XDG_CACHE_HOME", None)
os.environ.pop("NUMBA_CACHE_DIR", None)
os.environ["TMPDIR"] = sys.argv[3]
tempfile.tempdir = None
import sif.core.winnowc as wc; wc._winnowc = None  # numba's kernel, the fallback, as tested
from sif.cli import main
main(["index", "-j", "1", "--index", sys.argv[1], sys.argv[2]], prog_name="sif")
"""

LIST_MODULES = r"""
import atexit, json, sys
atexit.register(lambda: open(sys.argv[3], "w").write(json.dumps(sorted(sys.modules))))
import sif.core.winnowc as wc; wc._winnowc = None  # numba's kernel, the fallback, as tested
from sif.cli import main
main(["index", "-j", "1", "--index", sys.argv[1], sys.argv[2]], prog_name="sif")
"""


@pytest.mark.parametrize("tmp_writable", [True, False])
def test_index_of_a_large_file_as_nobody_without_a_home(tmp_writable: bool) -> None:
    """The cache goes to TMPDIR/sif-UID/numba (0700); with no writable TMPDIR, none."""
    assert os.geteuid() == 0, "this test needs root (CI runs as root): it runs sif as nobody"
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o777)
        root = Path(top)
        rng = np.random.default_rng(5)
        # Over 8 MiB: the numba kernels, not numpy.
        write(root / "t/big.bin", rng.integers(0, 256, 9 << 20, dtype=np.uint8).tobytes())
        os.chmod(root / "t", 0o755)
        os.chmod(root / "t/big.bin", 0o644)
        (root / "tmp").mkdir()
        os.chmod(root / "tmp", 0o777 if tmp_writable else 0o755)
        modules = root / "modules.json"
        env = {**os.environ, "NUMBA_CACHE_DIR": str(root / "root-cache")}
        subprocess.run(
            [sys.executable, "-c", LIST_MODULES, str(root / "idx0"), str(root / "t"), str(modules)],
            check=True,
            capture_output=True,
            env=env,
            timeout=300,
        )
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                AS_NOBODY,
                str(root / "idx"),
                str(root / "t"),
                str(root / "tmp"),
                str(modules),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=top,
        )
        assert out.returncode == 0, out.stderr
        assert "1 new" in out.stderr
        cache = root / "tmp" / "sif-65534"
        if tmp_writable:
            assert cache.stat().st_uid == 65534 and cache.stat().st_mode & 0o777 == 0o700
            assert any(p.suffix == ".nbi" for p in (cache / "numba").rglob("*"))
        else:  # compiled in the process, cached nowhere
            assert not cache.exists()


def test_a_cache_directory_on_a_full_file_system_leaves_the_kernels_uncached(
    tmp_path: Path,
) -> None:
    """The cache directory is found writable (a directory costs no block on a tmpfs), then
    numba's save fails with ENOSPC: the kernels run uncached and explain ends 0 ("no space
    left on device", exit 3, before)."""
    from actionutil import tmpfs

    (tmp_path / "a.txt").write_text("".join(f"{i}\\n" for i in range(3000)))
    (tmp_path / "b.txt").write_text("".join(f"{i}\\n" for i in range(2000)))
    with tmpfs("256k") as full:
        fill(full)
        (full / "numba").mkdir()
        done = subprocess.run(
            [sys.executable, "-m", "sif", "explain", "--format", "json", "a.txt", "b.txt"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "NUMBA_CACHE_DIR": str(full / "numba")},
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["passages"] == 1
