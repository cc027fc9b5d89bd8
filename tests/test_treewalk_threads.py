"""The C walk's helper threads where things go wrong: out of memory while a helper reads
a subdirectory the walk has not taken yet, and Ctrl-C while the walk waits for a helper.

Each case runs in a child process (a use after free may crash it, a wait that ignores
signals hangs it: the parent kills a child that does not end), with the tests' hooks of
sif._treec (``_test_hooks``): a helper holds, unread, each node it picks under a given
directory until the walker stops; the walk waits until the helpers hold that
directory's subdirectories before it resolves it, and can fail that resolve as out of
memory. ``MALLOC_PERTURB_`` fills freed memory, so that a node freed under a helper is
noticed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sif.treewalk as treewalk
from treeutil import write

#: What a child that does not end is given before the parent kills it (a hang).
HANG = 60

_CHILD = """
import faulthandler, os, signal, sys
from sif import _treec

# Ctrl-C raises here whatever this process inherited: a test run started as a background
# job of a script ignores SIGINT (the shell's rule), and Python then leaves it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

# A hang shows where this thread is (in the walk or in close()) before the parent kills
# the child.
root, hook, fail, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
faulthandler.dump_traceback_later(int(sys.argv[5]), exit=True)
_treec._test_hooks(os.fsencode(hook), fail)
st = os.stat(root)
tree = _treec.Walker(False, 0, 1 << 62, True, False, b"", threads, b"")
tree.add_root(os.fsencode(root), st.st_dev, st.st_ino)
print("walking", flush=True)
try:
    while tree.read(1000) is not None:
        pass
    print("done", flush=True)
except MemoryError:
    print("out of memory", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
tree.close()
print("freed while read:", _treec._test_hooks(b"", 0), flush=True)
"""


@pytest.fixture(autouse=True)
def _built() -> None:
    if treewalk._treec is None:
        pytest.fail("sif._treec is not built (pip install -e . builds it)")


def _child(root: Path, hook: Path, fail: int, threads: int) -> subprocess.Popen[str]:
    env = {**os.environ, "MALLOC_PERTURB_": "165"}
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(root),
            str(hook),
            str(fail),
            str(threads),
            str(HANG - 15),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ended(p: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"the walk hung: {out!r} {err[-500:]!r}")
    return p.returncode, out, err


@pytest.mark.parametrize(
    ("fail", "threads"),
    [(1, 1), (1, 2), (2, 2)],
    ids=["at its files, one held", "at its files, two held", "at its second subdirectory"],
)
def test_out_of_memory_in_a_resolve_leaves_the_helpers_subdirectories_to_them(
    tmp_path: Path, fail: int, threads: int
) -> None:
    """The resolve of a directory fails (out of memory) while helpers read subdirectories
    of it that the walk has not taken: those go to the helpers (who free them), never
    freed under them."""
    d = tmp_path / "t" / "c"
    write(d / "f", b"x")
    for sub in ("s1", "s2"):
        write(d / sub / "g", b"y")
    code, out, err = _ended(_child(tmp_path / "t", d, fail, threads))
    assert code == 0, err[-2000:]
    assert out.splitlines()[1:] == ["out of memory", "freed while read: 0"]


def test_ctrl_c_while_the_walk_waits_for_a_helper(tmp_path: Path) -> None:
    """The walk waits for a helper that reads the next directory (one of 500k entries
    took 2.3 s, cold): Ctrl-C stops it then, not when the helper is done. Here the helper
    holds its directory until the walker stops, which only close() does."""
    d = tmp_path / "t" / "a"
    write(d / "b" / "f", b"x")
    p = _child(tmp_path / "t", d, 0, 1)
    assert p.stdout is not None
    assert p.stdout.readline() == "walking\n"
    time.sleep(0.5)  # into the wait (a signal before it ends the walk too)
    p.send_signal(signal.SIGINT)
    code, out, err = _ended(p)
    assert code == 0, err[-2000:]
    assert out.splitlines() == ["interrupted", "freed while read: 0"]
