"""The pieces of a line under its passages (sif.explainview._pieces), by a sweep: the same
pieces as asking every span for every piece (the form before, O(P^2) a line)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sif.explainview import _decode, _pieces


def by_every_span(data: bytes, ls: int, le: int, over: list[tuple[int, int, int]]) -> tuple:  # type: ignore[type-arg]
    """The form before the sweep, kept as the reference."""
    if not over:
        return ((_decode(data[ls:le]), 0, ()),)
    if le == ls:
        every = tuple(sorted({p for _, _, p in over}))
        return (("", every[0], every),)
    spans = [(max(s, ls), min(e, le), p) for s, e, p in over if s < le]
    cuts = sorted({ls, le, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out: list = []  # type: ignore[type-arg]
    for x, y in itertools.pairwise(cuts):
        if y <= x:
            continue
        every = tuple(sorted({p for s, e, p in spans if s <= x and e >= y}))
        text = _decode(data[x:y])
        if out and out[-1][2] == every:
            out[-1] = (out[-1][0] + text, out[-1][1], every)
        else:
            out.append((text, every[0] if every else 0, every))
    return tuple(out) or (("", 0, ()),)


@st.composite
def line_and_passages(draw: st.DrawFn) -> tuple[bytes, int, int, list[tuple[int, int, int]]]:
    data = draw(st.binary(min_size=1, max_size=120))
    ls = draw(st.integers(0, len(data) - 1))
    le = draw(st.integers(ls, len(data)))
    over = []
    for p in range(1, draw(st.integers(0, 12)) + 1):
        # what the caller passes: passages still open at the line (end past its start)
        s = draw(st.integers(max(0, ls - 20), le + 5))
        e = draw(st.integers(max(s + 1, ls + 1), len(data) + 20))
        over.append((s, e, draw(st.sampled_from([p, p, 1]))))  # an id may repeat
    return data, ls, le, over


@settings(deadline=None, max_examples=400)
@given(line_and_passages())
def test_the_sweep_gives_the_pieces_of_asking_every_span(
    case: tuple[bytes, int, int, list[tuple[int, int, int]]],
) -> None:
    data, ls, le, over = case
    assert _pieces(data, ls, le, over) == by_every_span(data, ls, le, over)


def test_a_line_of_many_passages_gives_a_piece_each_and_the_gaps() -> None:
    """2,000 passages over one line (a minified file): a piece for each, one for each
    gap between them. (Speed is bench material: the form before took 8 s for a 10 MB
    line of 10 k passages, the sweep 0.1 s.)"""
    n = 2_000
    data = b"x" * (100 * n)
    over = [(100 * k, 100 * k + 60, k + 1) for k in range(n)]
    pieces = _pieces(data, 0, len(data), over)
    assert pieces == by_every_span(data, 0, len(data), over)
    assert len(pieces) == 2 * n and pieces[0][2] == (1,) and pieces[1][2] == ()
