"""Self-contained HTML pages: ``sif explain --format html`` and the report of
``sif similar``/``sif query --format html``.

One file each, with its styles, scripts and data inline, and nothing
fetched (no CDN, no font): it opens from disk with the network off. The
summary and the table are plain HTML, readable without JavaScript; the
scripts add sorting, filtering, the graph and the pair viewer. The graph is
drawn by Cytoscape.js (MIT licence, ``assets/cytoscape.LICENSE``), vendored
as its minified file: a maintained library with no dependencies, directed
edges with arrows, and a canvas renderer that stays responsive with
thousands of elements.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["asset", "esc", "json_script", "page"]


@lru_cache(maxsize=16)
def asset(name: str) -> str:
    """The text of ``assets/name`` (package data)."""
    return (resources.files("sif.html") / "assets" / name).read_text(encoding="utf-8")


def esc(text: object) -> str:
    """``text`` escaped for HTML content and attribute values."""
    return html.escape(str(text), quote=True)


def json_script(element_id: str, data: Any) -> str:
    """``data`` as an inline JSON block (``</`` escaped so that it cannot end the script)."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    # "<\u0021--" where it was "<\!--", which no JSON parser takes: a path holding "<!--"
    # made the page's data unreadable (every script of the report stopped).
    body = body.replace("</", "<\\/").replace("<!--", "<\\u0021--")
    return f'<script type="application/json" id="{esc(element_id)}">{body}</script>'


def _safe_script(text: str) -> str:
    return text.replace("</script", "<\\/script")


def page(
    title: str, body: str, *, styles: tuple[str, ...] = (), scripts: tuple[str, ...] = ()
) -> str:
    """A whole page: ``body`` with the named assets inlined (styles, then scripts)."""
    css = "\n".join(asset(s) for s in styles)
    # A script's text may not hold "</script": the vendored files are checked for it.
    js = "\n".join(f"<script>/* {esc(s)} */\n{_safe_script(asset(s))}\n</script>" for s in scripts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{esc(title)}</title>\n<style>\n{css}\n</style>\n</head>\n"
        f"<body>\n{body}\n{js}\n</body></html>\n"
    )


def write_page(text: str, path: str | None) -> None:
    """Write a page to ``path`` (:func:`sif.outfile.written_text`), or to stdout."""
    import sys

    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from sif.outfile import written_text

    with written_text(path) as f:
        f.write(text)


def explainer(normalize: str | None) -> Any:
    """The report's way to explain a pair: :func:`sif.passages.explain`, content kept."""
    from sif.passages import explain

    mode = normalize or "auto"
    return lambda a, b: explain(a, b, normalize=mode, keep_content=True)
