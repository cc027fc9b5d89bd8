"""No C extension lets the garbage collector see a container with an empty slot.

A list made whole (``PyList_New(n)``) and filled slot by slot holds NULL slots
until it is full. If an allocation meanwhile runs a collection (any new
tracked object: a tuple, an error object), a finalizer can find the list
through ``gc.get_objects()`` and read a NULL slot: a crash. ``Py_BuildValue``
with a nested tuple does the same to its outer tuple. A child process arms a
finalizer that runs at every collection (thresholds of 1, the list free list
drained so that every ``PyList_New`` allocates) and looks, with ``ctypes``, for
a list or tuple with an empty slot; each call of sif's extensions, on sif's own
kind of arguments and on bad ones, must leave it nothing to find. (From the
review of 2026-12-05: ``_dirc.read_dir``, ``_treec.Walker.read`` and
``_readc.read_files`` were found so on their success paths, and crashed.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BOMB = """
import ctypes, gc, os, sys, tempfile
from array import array
seen = []
hold = []
P = ctypes.POINTER(ctypes.c_void_p)
HEAD = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)  # where the items begin

def null_at(o):
    if type(o) is list:
        items = ctypes.cast(ctypes.c_void_p.from_address(id(o) + HEAD).value, P)
    else:
        items = ctypes.cast(id(o) + HEAD, P)
    for i in range(len(o)):
        if not items[i]:
            return i
    return -1

class Bomb:
    def __del__(self):
        objs = gc.get_objects()
        for o in objs:
            if type(o) in (list, tuple) and o is not objs:
                i = null_at(o)
                if i >= 0:
                    seen.append((type(o).__name__, len(o), i))
        del objs
        hold.append([[] for _ in range(100)])  # drain the list free list again
        arm()

def arm():
    b = Bomb()
    b.self = b

def run(f, *a, in_except=False):
    gc.collect()
    gc.disable()
    hold.append([[] for _ in range(100)])
    arm()
    gc.set_threshold(1)
    gc.enable()
    try:
        if in_except:  # while another is handled, an error object is made at once
            try:
                raise KeyError
            except KeyError:
                return f(*a)
        return f(*a)
    finally:
        gc.disable()
        gc.set_threshold(700)

d = tempfile.mkdtemp()
for i in range(30):
    with open(os.path.join(d, f"f{i}"), "w") as fh:
        fh.write("x")
    os.mkdir(os.path.join(d, f"d{i}"))
"""

CASES = {
    "read_dir": """
        from sif._dirc import read_dir
        out = run(read_dir, d, False, 0, 1 << 62)
        assert len(out[0]) == 30 + BAD and len(out[2]) == 30
    """,
    "walker_read": """
        from sif import _treec
        st = os.stat(d)
        w = _treec.Walker(False, 0, 1 << 62, True, False, b"", 0, b"")
        w.add_root(os.fsencode(d), st.st_dev, st.st_ino)
        out = run(w.read, 100000, 0)
        w.close()
        assert out[0]
    """,
    "read_files": """
        from sif.index._readc import read_files
        files = []
        for i in range(30):
            p = os.path.join(d, f"f{i}")
            st = os.stat(p)
            files.append((p, st.st_dev, st.st_ino))
        if BAD:
            files[10] = "not a tuple"
        try:
            out = run(read_files, files, 1 << 20, in_except=bool(BAD))
            assert len(out[1]) == 30
        except TypeError:
            assert BAD
    """,
    "take": """
        from sif.exact._firstc import take
        try:
            run(take, [object() for _ in range(10)], [0, 1, 2, 99 if BAD else 3, 4, 5, 6],
                in_except=bool(BAD))
            assert not BAD
        except IndexError:
            assert BAD
    """,
    "decode_names": """
        from sif._treec import decode_names
        offsets = array("q", [0, 1, 2, 3, 9 if BAD else 4, 5])
        try:
            run(decode_names, b"abcdefgh", offsets, in_except=bool(BAD))
            assert not BAD
        except ValueError:
            assert BAD
    """,
}

BAD_NAMES = """
for i in range(3):  # names that are not UTF-8: a problem each, made mid-fill
    with open(os.path.join(os.fsencode(d), b"bad\\xff%d" % i), "w") as fh:
        fh.write("x")
"""

pytestmark = pytest.mark.skipif(
    sys.implementation.name != "cpython", reason="reads CPython's list and tuple layout"
)


@pytest.mark.parametrize("bad", [False, True], ids=["sif's arguments", "bad ones"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_no_empty_slot_is_ever_seen_by_the_collector(case: str, bad: bool) -> None:
    script = BOMB + f"BAD = {3 if bad else 0}\n"
    if bad and case in ("read_dir", "walker_read"):
        script += BAD_NAMES
    script += textwrap.dedent(CASES[case]) + "print('seen', sorted(set(seen)))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip().splitlines()[-1] == "seen []"
