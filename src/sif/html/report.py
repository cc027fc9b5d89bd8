"""The HTML report of ``sif similar`` and ``sif query`` (``--format html``).

One self-contained page (:func:`sif.html.page`):

- a summary (roots, parameters, counts, time) and a histogram of the scores
  (inline SVG);
- the table of pairs: the first :data:`STATIC_ROWS` as plain HTML (readable
  without JavaScript, and it says how many there are); the script sorts and
  filters all of them (path, score range, kind) and says how many are shown;
- the graph (Cytoscape.js): exact replicas collapsed into one node with
  their count, an edge from the contained file to the container (the file
  more contained in the other points at it), clusters (connected components)
  coloured, a threshold slider; at most :data:`EDGES_PER_NODE` edges a node
  and :data:`MAX_EDGES` in all, the best ones, and the page says how many
  were left out (all stay in the table);
- the pair viewer: a row or an edge opens the pair's passages
  (:func:`sif.html.explain.pair_fragment`), computed at report time for the
  :data:`EXPLAINED_PAIRS` best pairs (files under
  :data:`EXPLAIN_MAX_BYTES`); they are also listed at the end of the page,
  visible without JavaScript.

The results are read through their public values only: a pair's files, its
score and both containments (the exact ones when known).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sif.events import display_path
from sif.html import esc, json_script, page

#: Rows of the table written as plain HTML (the script shows every pair).
STATIC_ROWS = 1000
#: Edges of the graph at most per node, and in all (the best pairs).
EDGES_PER_NODE = 12
MAX_EDGES = 3000
#: Pairs whose passages are computed and embedded (the best ones).
EXPLAINED_PAIRS = 20
#: A pair is explained only when both files are at most this big.
EXPLAIN_MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class ReportPair:
    """A pair as the report shows it: ``a_in_b`` is the share of A found in B."""

    a: str
    b: str
    a_size: int
    b_size: int
    kind: str
    score: float  # percent
    a_in_b: float
    b_in_a: float
    exact: bool  # the score is exact (all windows), not an estimate
    identical: bool


def pairs_of_similar(result: Any) -> list[ReportPair]:
    """:class:`sif.similar.SimilarResult` pairs as :class:`ReportPair` values."""
    out = []
    for p in result.pairs:
        ea, eb = getattr(p, "exact_a_in_b", None), getattr(p, "exact_b_in_a", None)
        known = ea is not None and eb is not None  # the score is then the exact one
        a_in_b = float(ea) if ea is not None and eb is not None else float(p.a_in_b)
        b_in_a = float(eb) if ea is not None and eb is not None else float(p.b_in_a)
        out.append(
            ReportPair(
                p.a.path,
                p.b.path,
                int(p.a.size),
                int(p.b.size),
                str(p.a.kind),
                float(p.score),
                a_in_b,
                b_in_a,
                known,
                bool(p.identical),
            )
        )
    return out


def pairs_of_query(results: Iterable[Any]) -> list[ReportPair]:
    """:class:`sif.query.QueryResult` matches as pairs (A: the query, B: the match)."""
    out = []
    for q in results:
        by = getattr(q, "by", "similarity")
        for m in q.matches:
            out.append(
                ReportPair(
                    q.path,
                    m.path,
                    int(q.size),
                    int(m.size),
                    str(m.kind),
                    float(m.score(by)),
                    float(m.query_in_file),
                    float(m.file_in_query),
                    False,
                    bool(m.exact),
                )
            )
    return out


# --- the graph -----------------------------------------------------------------------


class _Classes:
    """Union-find over paths: exact replicas (identical pairs) become one class."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, x: str, y: str) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self.parent[max(rx, ry)] = min(rx, ry)


def graph_data(pairs: Sequence[ReportPair]) -> dict[str, Any]:
    """Nodes (replica classes), edges (contained -> container, capped) and their counts.

    Made from the files' own names; a name is shown (ids, labels, paths) as the
    table shows it (:func:`sif.events.display_path`, which tells every two apart).
    """
    classes = _Classes()
    for p in pairs:
        classes.find(p.a)
        classes.find(p.b)
        if p.identical:
            classes.union(p.a, p.b)
    members: dict[str, list[str]] = {}
    for path in classes.parent:
        members.setdefault(classes.find(path), []).append(path)
    best: dict[tuple[str, str], tuple[float, int]] = {}
    for k, p in enumerate(pairs):
        ca, cb = classes.find(p.a), classes.find(p.b)
        if ca == cb:
            continue
        src, dst = (ca, cb) if p.a_in_b >= p.b_in_a else (cb, ca)
        key = (src, dst)
        if key not in best or p.score > best[key][0]:
            best[key] = (p.score, k)
    degree: dict[str, int] = {}
    edges: list[dict[str, Any]] = []
    left_out = 0
    for (src, dst), (score, k) in sorted(best.items(), key=lambda kv: -kv[1][0]):
        if (
            len(edges) >= MAX_EDGES
            or degree.get(src, 0) >= EDGES_PER_NODE
            or degree.get(dst, 0) >= EDGES_PER_NODE
        ):
            left_out += 1
            continue
        degree[src] = degree.get(src, 0) + 1
        degree[dst] = degree.get(dst, 0) + 1
        edges.append({"s": src, "t": dst, "score": round(score, 2), "pair": k})
    drawn: set[str] = {str(e["s"]) for e in edges} | {str(e["t"]) for e in edges}
    for p in pairs:  # classes of replicas alone still show as a node
        c = classes.find(p.a)
        if len(members[c]) > 1:
            drawn.add(c)
    # Clusters: connected components of the drawn edges.
    comp = _Classes()
    for e in edges:
        comp.union(str(e["s"]), str(e["t"]))
    cluster_ids: dict[str, int] = {}
    nodes = []
    for c in sorted(drawn):
        root = comp.find(c)
        cid = cluster_ids.setdefault(root, len(cluster_ids))
        ms = sorted(members[c])
        nodes.append(
            {
                "id": display_path(c),
                "label": display_path(os.path.basename(c) or c),
                "count": len(ms),
                "paths": [display_path(m) for m in ms[:50]],
                "cluster": cid,
            }
        )
    return {
        "nodes": nodes,
        "edges": [{**e, "s": display_path(e["s"]), "t": display_path(e["t"])} for e in edges],
        "edges_total": len(best),
        "edges_left_out": left_out,
        "per_node": EDGES_PER_NODE,
        "max_edges": MAX_EDGES,
        "clusters": len(cluster_ids),
    }


# --- the page ------------------------------------------------------------------------


def _histogram(scores: Sequence[float]) -> str:
    """Scores in 20 bins of 5 points, as an inline SVG bar chart."""
    bins = [0] * 20
    for s in scores:
        bins[min(19, max(0, int(s // 5)))] += 1
    top = max(bins) or 1
    bars = []
    for i, n in enumerate(bins):
        h = 100 * n / top
        bars.append(
            f'<rect x="{i * 20 + 1}" y="{110 - h:.1f}" width="18" height="{h:.1f}">'
            f"<title>{i * 5}-{i * 5 + 5}%: {n:,} pairs</title></rect>"
        )
        if n:
            bars.append(f'<text x="{i * 20 + 10}" y="{106 - h:.1f}" class="n">{n}</text>')
    ticks = "".join(f'<text x="{i * 20}" y="124">{i * 5}</text>' for i in range(0, 21, 4))
    return (
        '<svg class="hist" viewBox="0 -5 410 148" role="img" aria-label="histogram of scores">'
        f'{"".join(bars)}{ticks}<text x="170" y="140">score %</text></svg>'
    )


def _row(k: int, p: ReportPair) -> str:
    how = "exact copy" if p.identical else ("exact" if p.exact else "estimate")
    return (
        f'<tr data-pair="{k}"><td class="num">{p.score:.1f}</td><td>{esc(p.a)}</td>'
        f'<td>{esc(p.b)}</td><td class="num">{100 * p.a_in_b:.1f}</td>'
        f'<td class="num">{100 * p.b_in_a:.1f}</td><td class="num">{p.a_size:,}</td>'
        f'<td class="num">{p.b_size:,}</td><td>{esc(p.kind)}</td><td>{how}</td></tr>'
    )


Explainer = Callable[[str, str], Any]


def _explained(
    pairs: Sequence[ReportPair], explainer: Explainer | None, on_error: Callable[[str], None]
) -> dict[int, str]:
    """Pair index -> the pair's HTML (:func:`pair_fragment`), for the best pairs."""
    from sif.html.explain import pair_fragment

    out: dict[int, str] = {}
    if explainer is None:
        return out
    order = sorted(range(len(pairs)), key=lambda k: -pairs[k].score)
    for k in order:
        if len(out) >= EXPLAINED_PAIRS:
            break
        p = pairs[k]
        if max(p.a_size, p.b_size) > EXPLAIN_MAX_BYTES:
            continue
        try:
            expl = explainer(p.a, p.b)
        except Exception as exc:  # the file changed or went: the report still stands
            on_error(f"{display_path(p.a)} / {display_path(p.b)}: passages not embedded ({exc})")
            continue
        out[k] = pair_fragment(expl, context=2, passage_lines=24, max_rows=800, key=str(k))
    return out


def render_report(
    title: str,
    facts: Sequence[tuple[str, str]],
    pairs: Sequence[ReportPair],
    *,
    explainer: Explainer | None = None,
    on_error: Callable[[str], None] = lambda _m: None,
) -> str:
    """The whole page. ``facts``: (name, value) lines of the summary."""
    t0 = time.perf_counter()
    fragments = _explained(pairs, explainer, on_error)  # the files' own names, to open them
    graph = graph_data(pairs)
    # Shown, a name that is not valid UTF-8 is in the shell's $'...' quoting, as in the text
    # reports: the page stays valid UTF-8 (its raw bytes were written into it).
    pairs = [replace(p, a=display_path(p.a), b=display_path(p.b)) for p in pairs]
    order = sorted(range(len(pairs)), key=lambda k: -pairs[k].score)
    static = "".join(_row(k, pairs[k]) for k in order[:STATIC_ROWS])
    n = len(pairs)
    shown = min(n, STATIC_ROWS)
    kinds = sorted({p.kind for p in pairs})
    facts_html = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    data = {
        "pairs": [
            [
                p.a,
                p.b,
                round(p.score, 3),
                round(p.a_in_b, 5),
                round(p.b_in_a, 5),
                p.a_size,
                p.b_size,
                p.kind,
                p.exact,
                p.identical,
            ]
            for p in pairs
        ],
        "graph": graph,
        "explained": sorted(fragments),
    }
    pair_html = "".join(
        f'<details class="explained" id="pair-{k}"><summary>{esc(pairs[k].a)} ↔ '
        f"{esc(pairs[k].b)} ({pairs[k].score:.1f}%)</summary>{frag}</details>"
        for k, frag in sorted(fragments.items(), key=lambda kv: -pairs[kv[0]].score)
    )
    all_note = " (all)" if shown == n else ""
    kind_options = "".join(f'<option value="{esc(k)}">{esc(k)}</option>' for k in kinds)
    body = f"""
<header><h1>{esc(title)}</h1></header>
<section id="summary"><h2>Summary</h2>
<table class="facts">{facts_html}
<tr><th>pairs</th><td>{n:,}</td></tr>
<tr><th>graph</th><td>{len(graph["nodes"]):,} nodes (exact replicas collapsed),
{len(graph["edges"]):,} of {graph["edges_total"]:,} edges drawn (at most
{graph["per_node"]} a node, {graph["max_edges"]:,} in all: {graph["edges_left_out"]:,}
left out of the graph, all in the table), {graph["clusters"]:,} clusters</td></tr>
<tr><th>passages</th><td>embedded for the {len(fragments)} best pairs (files up to
{EXPLAIN_MAX_BYTES >> 20} MiB); for any pair: <code>sif explain A B</code></td></tr>
</table>
<h3>Scores</h3>{_histogram([p.score for p in pairs])}
</section>
<section id="graph-section"><h2>Graph</h2>
<p class="note">An arrow goes from the contained file to the file that contains it; a node with a
count stands for that many exact copies; colours are clusters. Click an edge for the pair.</p>
<div class="controls"><label>threshold <input type="range" id="threshold" min="0" max="100"
step="1" value="0"> <span id="threshold-value">0</span>%</label>
<span id="graph-count">{len(graph["edges"]):,} edges</span></div>
<div id="graph"><noscript>The graph needs JavaScript; the table below lists every pair.
</noscript></div>
</section>
<section id="pairs-section"><h2>Pairs</h2>
<div class="controls"><label>path
<input type="search" id="filter-path" placeholder="part of a path"></label>
<label>score <input type="number" id="filter-min" min="0" max="100" value="0" step="any"> to
<input type="number" id="filter-max" min="0" max="100" value="100" step="any"></label>
<label>kind <select id="filter-kind"><option value="">all</option>{kind_options}</select>
</label></div>
<p id="table-count">{n:,} pairs; the table shows the {shown:,} best{all_note}.</p>
<table id="pairs"><thead><tr><th data-col="2">score %</th><th data-col="0">A</th>
<th data-col="1">B</th>
<th data-col="3">A in B %</th><th data-col="4">B in A %</th><th data-col="5">A bytes</th>
<th data-col="6">B bytes</th><th data-col="7">kind</th><th data-col="8">score</th></tr></thead>
<tbody>{static}</tbody></table>
</section>
<section id="viewer" hidden><h2>Pair <button type="button" id="viewer-close">close</button></h2>
<div id="viewer-body"></div></section>
<section id="explained-section"><h2>Passages of the best pairs</h2>
{pair_html or "<p>none embedded</p>"}</section>
<footer>made by sif in {time.perf_counter() - t0:.2f} s</footer>
{json_script("sif-data", data)}
"""
    return page(
        title,
        body,
        styles=("pair.css", "report.css"),
        scripts=("cytoscape.min.js", "pair.js", "report.js"),
    )


def similar_report(
    result: Any,
    roots: Sequence[str],
    explainer: Explainer | None = None,
    on_error: Callable[[str], None] = lambda _m: None,
) -> str:
    """The report of a :class:`sif.similar.SimilarResult` under ``roots``."""
    import dataclasses

    o, s = result.options, result.stats
    options = ", ".join(
        f"{f.name} {getattr(o, f.name)}" for f in dataclasses.fields(o) if f.name != "threshold"
    )
    facts = [
        ("roots", " ".join(display_path(r) for r in roots)),
        ("threshold", f"{o.threshold:g}%"),
        ("parameters", options),
        ("files", f"{getattr(s, 'files', 0):,}"),
        ("pairs sharing fingerprints", f"{getattr(s, 'pairs_collated', 0):,}"),
        ("groups", f"{len(result.groups):,}"),
        ("time", f"{getattr(s, 'seconds', 0.0):.2f} s"),
        ("made", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
    ]
    return render_report(
        "sif similar", facts, pairs_of_similar(result), explainer=explainer, on_error=on_error
    )


def query_report(
    results: Sequence[Any],
    explainer: Explainer | None = None,
    on_error: Callable[[str], None] = lambda _m: None,
) -> str:
    """The report of :class:`sif.query.QueryResult` values."""
    facts = [
        ("queries", " ".join(display_path(q.path) for q in results)),
        ("score", ", ".join(sorted({getattr(q, "by", "similarity") for q in results}))),
        ("matches", f"{sum(len(q.matches) for q in results):,}"),
        ("made", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
    ]
    return render_report(
        "sif query", facts, pairs_of_query(results), explainer=explainer, on_error=on_error
    )
