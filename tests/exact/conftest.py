"""The two loops of the first blocks: compiled (``sif.exact._firstc``) and Python.

A test that takes the ``first_loop`` fixture runs twice, once with each
(``"c"``: the extension, which this test run requires to be built, see
test_first.py; ``"python"``: ``first._firstc`` set to None, the loop of an
install without a compiler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sif.exact import first


@pytest.fixture(params=["c", "python"])
def first_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which loop reads the first blocks in this run of the test: "c" or "python"."""
    if request.param == "python":
        monkeypatch.setattr(first, "_firstc", None)
    elif first._firstc is None:
        pytest.fail("sif.exact._firstc is not built (pip install -e . builds it)")
    return str(request.param)


class RowByRow:
    """``sif.exact._firstc`` with ``after(path)`` called after each row it reads.

    The real ``read_first``, given one row at a time: its contract (read
    ``rows[start:end]``, return the position of the first row it leaves to
    Python) lets a test act on disk between two rows of one batch, as a spy
    on ``os.pread`` does in the Python loop.
    """

    def __init__(self, real: Any, after: Callable[[str], None]) -> None:
        self.real = real
        self.after = after
        self.calls: list[tuple[int, int]] = []  # (start, stop) of each call made

    def read_first(self, rows: list[int], start: int, end: int, *args: Any) -> int:
        dirs, dir_of, names = args[0], args[1], args[2]
        for k in range(start, end):
            stop: int = self.real.read_first(rows, k, k + 1, *args)
            self.calls.append((k, stop))
            if stop == k:
                return k  # this row is Python's
            self.after(dirs[dir_of[rows[k]]] + names[rows[k]])
        return end


@pytest.fixture
def row_by_row(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[str], None]], RowByRow]:
    """Install a :class:`RowByRow` around the compiled loop (when it is the one in use)."""

    def install(after: Callable[[str], None]) -> RowByRow:
        wrapper = RowByRow(first._firstc, after)
        if first._firstc is not None:
            monkeypatch.setattr(first, "_firstc", wrapper)
        return wrapper

    return install
