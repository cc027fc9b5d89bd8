"""``sif explain --format html``: both panes of a pair, each passage a colour.

:func:`pair_fragment` is the pair as HTML (the summary, the passages as
buttons, the two panes of :func:`sif.explainview.pane`); the report of
``sif similar`` embeds it for its top pairs. :func:`explain_page` is the
standalone page. Clicking a passage (its button, or its text in a pane)
scrolls both panes to it (``assets/pair.js``); without JavaScript the
panes are plain, coloured, preformatted text.
"""

from __future__ import annotations

from sif.events import display_path
from sif.explainview import DEFAULT_CONTEXT, MAX_ROWS, PASSAGE_LINES, Row, pane, summary_lines
from sif.html import esc, page
from sif.passages import Explanation

#: Passages listed as buttons at most (all are coloured in the panes).
MAX_BUTTONS = 500


def colour(pid: int) -> str:
    """The passage's background colour: hues spread by the golden angle, light."""
    return f"hsl({(pid * 137.508) % 360:.0f},75%,82%)"


def _row_html(row: Row) -> str:
    if row.line == 0:
        return f'<span class="gap">  ··· {row.skipped:,} {esc(row.note)} ···</span>\n'
    parts = []
    for text, pid, every in row.pieces:
        if pid:
            style = f"background:{colour(pid)}"
            ids = " ".join(map(str, every))
            parts.append(f'<span class="p" data-p="{ids}" style="{style}">{esc(text)}</span>')
        else:
            parts.append(esc(text))
    number = "" if row.binary else f"{row.line:>6}"
    return f'<span class="ln">{number:>6}</span> {"".join(parts)}\n'


def pair_fragment(
    expl: Explanation,
    *,
    context: int = DEFAULT_CONTEXT,
    passage_lines: int = PASSAGE_LINES,
    max_rows: int = MAX_ROWS,
    key: str = "",
) -> str:
    """The pair as one ``<div class="pair">`` (needs :attr:`Explanation.content`)."""
    summary = "".join(f"<li>{esc(line)}</li>" for line in summary_lines(expl))
    buttons = []
    for p in expl.passages[:MAX_BUTTONS]:
        where = (
            f"A {p.a_lines[0]}-{p.a_lines[1]} ↔ B {p.b_lines[0]}-{p.b_lines[1]}"
            if p.a_lines is not None and p.b_lines is not None
            else f"A @{p.a_start:#x} ↔ B @{p.b_start:#x}"
        )
        buttons.append(
            f'<button type="button" class="pbtn" data-p="{p.id}" style="background:{colour(p.id)}"'
            f' title="A [{p.a_start}, {p.a_end}) B [{p.b_start}, {p.b_end})">'
            f"{p.id}: {esc(where)} ({p.length:,} B)</button>"
        )
    if len(expl.passages) > MAX_BUTTONS:
        buttons.append(f"<span>… {len(expl.passages) - MAX_BUTTONS:,} more passages</span>")
    if not expl.passages:
        buttons.append("<span>no shared passage: 0%</span>")
    panes = []
    for side, info in (("a", expl.a), ("b", expl.b)):
        rows = pane(expl, side, context, passage_lines, max_rows)
        body = "".join(_row_html(r) for r in rows) if expl.passages else ""
        label = "A" if side == "a" else "B"
        panes.append(
            f'<div class="pane" data-side="{side}"><div class="pane-title">{label} '
            f"{esc(display_path(info.path))}</div><pre>{body}</pre></div>"
        )
    return (
        f'<div class="pair" data-key="{esc(key)}"><ul class="pair-summary">{summary}</ul>'
        f'<div class="passages">{"".join(buttons)}</div>'
        f'<div class="panes">{"".join(panes)}</div></div>'
    )


def explain_page(expl: Explanation, *, context: int = DEFAULT_CONTEXT) -> str:
    """The standalone page of ``sif explain --format html``."""
    title = f"sif explain {display_path(expl.a.path)} {display_path(expl.b.path)}"
    body = f"<h1>{esc(title)}</h1>\n" + pair_fragment(expl, context=context)
    return page(title, body, styles=("pair.css",), scripts=("pair.js",))
