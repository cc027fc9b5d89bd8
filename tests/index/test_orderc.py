"""A segment's rows in order in C (sif.index._orderc) against numpy's stable sorts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sif.index import segments


@pytest.fixture(autouse=True)
def _built() -> None:
    if segments._orderc is None:
        pytest.fail("sif.index._orderc is not built (pip install -e . builds it)")


def by_numpy(values: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(values, kind="stable")  # timsort: stable, any width
    return values[order], local[order]


# Values from few (ties, equal low or high halves) to any 32-bit value.
values_of = st.one_of(
    hnp.arrays(np.uint32, st.integers(0, 300), elements=st.integers(0, 3)),
    hnp.arrays(
        np.uint32,
        st.integers(0, 300),
        elements=st.sampled_from([0, 1, 0xFFFF, 0x10000, 0x1FFFF, 0xFFFF0000, 0xFFFFFFFF]),
    ),
    hnp.arrays(np.uint32, st.integers(0, 2000), elements=st.integers(0, 2**32 - 1)),
)


@settings(deadline=None, max_examples=150)
@given(values_of)
def test_c_rows_are_numpys_stable_sort(values: np.ndarray) -> None:
    local = np.arange(len(values), dtype=np.uint32)[::-1].copy()  # order shows stability
    got = segments.sorted_rows(values, local)
    want = by_numpy(values, local)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[0].dtype == np.uint32 and got[1].dtype == np.uint32


@settings(deadline=None, max_examples=40)
@given(values_of)
def test_without_the_extension_the_same_rows(values: np.ndarray) -> None:
    local = np.arange(len(values), dtype=np.uint32)
    want = segments.sorted_rows(values, local)
    saved = segments._orderc
    segments._orderc = None
    try:
        got = segments.sorted_rows(values, local)
    finally:
        segments._orderc = saved
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_order_rows_refuses_bad_arrays() -> None:
    # A wrong call is a ValueError, never a write outside the buffers.
    c = segments._orderc
    a = np.arange(10, dtype=np.uint32)
    with pytest.raises(ValueError):
        c.order_rows(a, a[:9].copy(), np.empty(10, np.uint32), np.empty(10, np.uint32))
    with pytest.raises(ValueError):  # 8-byte items
        c.order_rows(a.astype(np.uint64), a, np.empty(10, np.uint32), np.empty(10, np.uint32))
    with pytest.raises(ValueError):  # an output over an input
        c.order_rows(a, a.copy(), a, np.empty(10, np.uint32))
    out = np.empty(10, np.uint32)
    with pytest.raises(ValueError):  # one array as both outputs
        c.order_rows(a, a.copy(), out, out)
    with pytest.raises((TypeError, BufferError, ValueError)):  # a read-only output
        out = np.empty(10, np.uint32)
        out.flags.writeable = False
        c.order_rows(a, a.copy(), out, np.empty(10, np.uint32))
