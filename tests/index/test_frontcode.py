"""Front coding of a segment's paths (``sif.index.frontcode``): the compiled pass
(``sif.index._frontc``) gives what the Python loop gives, and decodes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sif.index import frontcode


def test_the_compiled_front_coding_is_built() -> None:
    # setup.py builds it (optional=True only spares an install without a compiler).
    assert frontcode._frontc is not None


#: Path-like names over a small alphabet (long shared prefixes, and names that end
#: where a neighbour goes on), some longer than MAX_LCP.
_NAMES = st.lists(
    st.one_of(
        st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"/")),
        st.sampled_from([b"/a/b/", b"/a/b/c", b"/a/bc/d"]).flatmap(
            lambda p: st.integers(0, 300).map(lambda n: p + b"x" * n)
        ),
    ),
    max_size=200,
)


@settings(deadline=None, max_examples=300)
@given(_NAMES, st.booleans(), st.integers(0, 3))
# Past two blocks of similar names (every PATH_BLOCK-th path whole), and a path that
# is a prefix of the one before it (its lcp is its whole length, not more).
@example([b"/a/b/%04d" % i for i in range(3 * 64 + 5)], False, 0)
@example([b"/a/bc", b"/a/b", b"/a/b", b"", b"/a"], False, 1)
def test_the_compiled_front_coding_is_the_python_one(
    names: list[bytes], ordered: bool, lead: int
) -> None:
    if ordered:
        names = sorted(names)
    # The paths need not start at the buffer's first byte, nor end at its last.
    buf = b"#" * lead + b"".join(names) + b"tail"
    offsets = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum([len(n) for n in names], out=offsets[1:])
    offsets += lead
    compiled = frontcode.front_code(buf, offsets)
    python = frontcode._front_code_py(buf, offsets)
    assert compiled[0] == python[0]
    for a, b in zip(compiled[1:], python[1:], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # And it decodes: each path is its lcp bytes of the one before, then its suffix.
    suffixes, lcp, off = compiled
    prev = b""
    for i, name in enumerate(names):
        prev = prev[: int(lcp[i])] + suffixes[int(off[i]) : int(off[i + 1])]
        assert prev == name
    assert all(int(k) == 0 for k in lcp[:: frontcode.PATH_BLOCK])


def test_the_compiled_front_coding_refuses_offsets_outside_the_paths() -> None:
    from sif.index import _frontc

    for offsets in ([0, 5, 3], [0, 2, 9], [-1, 2], [3]):
        arr = np.array(offsets, dtype=np.int64)
        if len(arr) == 1:  # no path at all: nothing to refuse
            assert _frontc.front_code(b"abcdefgh", arr, 64, 255) == (b"", b"")
            continue
        with pytest.raises(ValueError):
            _frontc.front_code(b"abcdefgh", arr, 64, 255)
    with pytest.raises(ValueError):
        _frontc.front_code(b"ab", np.array([0, 2], dtype=np.int64), 0, 255)
