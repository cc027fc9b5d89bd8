"""The HTML report of sif similar / sif query, and sif explain's page, in a real browser.

Debian's chromium, headless, driven by chromium-driver through selenium (both
installed by .ci/run), with the network off: the page opened from disk must
show every path of the top pairs, draw the graph, answer the slider and a
click on a row or an edge, and log no error or warning.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from explainutil import spliced
from textgen import text
from treeutil import write

SIF = (sys.executable, "-m", "sif")


def sif(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A tree (three exact copies, a part of one, a spliced text, a pair of versions), its
    index, and the report of ``sif similar --format html``."""
    tmp = tmp_path_factory.mktemp("report")
    root = tmp / "tree"
    a = text(1, 20_000)
    write(root / "d1/a.txt", a)
    write(root / "d2/a copy.txt", a)
    write(root / "d2/a copy 2.txt", a)
    write(root / "d1/part.txt", a[2_000:12_000])
    other = text(2, 20_000)
    write(root / "d1/b.txt", other[:5_000] + a[1_000:4_000] + other[5_000:])
    c = text(7, 9_000)
    write(root / "d3/c.txt", c)
    write(root / "d3/c2.txt", c[:6_000] + text(8, 3_000))
    write(root / "d3/alone.txt", text(9, 5_000))
    out = tmp / "report.html"
    run = sif(
        "similar", "-q", "--index", tmp / "idx", "-t", "10", "--format", "html", "-o", out, root
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    return root, tmp / "idx", out


def data_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="sif-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_the_report_is_one_page_that_fetches_nothing(report: tuple[Path, Path, Path]) -> None:
    root, _, out = report
    page = out.read_text()
    assert "<link" not in page and not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    assert "default-src 'none'" in page  # nothing may be fetched, whatever a script tries
    data = data_of(page)
    pairs = data["pairs"]
    # Readable without JavaScript: the count, and every pair in the plain table.
    assert f"{len(pairs)} pairs; the table shows the {len(pairs)} best (all)." in page
    for a, b, *_ in pairs:
        assert f"<td>{a}</td><td>{b}</td>" in page.replace("&#x27;", "'")
    graph = data["graph"]
    copies = [n for n in graph["nodes"] if n["count"] == 3]
    assert len(copies) == 1 and {os.path.basename(p) for p in copies[0]["paths"]} == {
        "a.txt",
        "a copy.txt",
        "a copy 2.txt",
    }
    # Directed from the contained file to the container: part.txt -> the copies of a.txt.
    part = str(root / "d1/part.txt")
    assert any(e["s"] == part and e["t"] == copies[0]["id"] for e in graph["edges"])
    assert data["explained"] and "Passages of the best pairs" in page
    assert 'class="pane"' in page and "alone.txt" not in page


def test_the_graph_caps_edges_per_node_and_says_how_many_it_left_out() -> None:
    from sif.html.report import EDGES_PER_NODE, ReportPair, graph_data, render_report

    hub = "/t/hub.txt"
    pairs = [
        ReportPair(f"/t/part{i:02}.txt", hub, 100, 5_000, "text", 90 - i, 0.9, 0.02, True, False)
        for i in range(30)
    ]
    g = graph_data(pairs)
    assert len(g["edges"]) == EDGES_PER_NODE and g["edges_left_out"] == 30 - EDGES_PER_NODE
    assert all(e["t"] == hub for e in g["edges"])  # contained -> container
    assert [e["score"] for e in g["edges"]] == [90 - i for i in range(EDGES_PER_NODE)]
    page = " ".join(render_report("t", [], pairs).split())
    assert f"{EDGES_PER_NODE} of 30 edges drawn (at most {EDGES_PER_NODE} a node" in page
    assert f"{30 - EDGES_PER_NODE} left out of the graph, all in the table" in page


def test_query_writes_the_same_report(report: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, idx, _ = report
    out = tmp_path / "q.html"
    run = sif(
        "query",
        "-q",
        "--index",
        idx,
        "-t",
        "10",
        "--format",
        "html",
        "-o",
        out,
        root / "d1/part.txt",
    )
    assert run.returncode == 0, run.stderr
    data = data_of(out.read_text())
    assert {b for _, b, *_ in data["pairs"]} >= {
        str(root / "d1/a.txt"),
        str(root / "d2/a copy.txt"),
    }
    assert all(a == str(root / "d1/part.txt") for a, *_ in data["pairs"])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--proxy-server=127.0.0.1:9",  # the network is off: anything fetched would fail
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_report_works_in_chromium(
    report: tuple[Path, Path, Path], browser: object, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    d = browser
    _, _, out = report
    data = data_of(out.read_text())
    d.get(out.as_uri())
    body = d.find_element(By.TAG_NAME, "body").text
    for k in data["explained"]:  # every path of the top pairs is on the page
        a, b = data["pairs"][k][:2]
        assert a in body and b in body
    # The graph is drawn: Cytoscape's canvases, one node per replica class.
    canvases = d.find_elements(By.CSS_SELECTOR, "#graph canvas")
    assert canvases and all(c.size["width"] > 100 for c in canvases)
    nodes = d.execute_script("return window.sifReport.cy.nodes().length")
    assert nodes == len(data["graph"]["nodes"])
    # The slider hides the edges under the threshold.
    edges = data["graph"]["edges"]
    d.execute_script(
        "var s = document.getElementById('threshold'); s.value = 90;"
        "s.dispatchEvent(new Event('input'));"
    )
    strong = sum(e["score"] >= 90 for e in edges)
    assert 0 < strong < len(edges)
    assert d.find_element(By.ID, "graph-count").text.startswith(f"{strong} of {len(edges)} ")
    visible = d.execute_script(
        "return window.sifReport.cy.edges().filter(e => e.style('display') !== 'none').length"
    )
    assert visible == strong
    # The table filters (score range, path) and sorts, and says how many rows it shows.
    pairs = data["pairs"]
    d.execute_script(
        "var f = document.getElementById('filter-min'); f.value = 90;"
        "f.dispatchEvent(new Event('input'));"
    )
    high = sum(p[2] >= 90 for p in pairs)
    assert len(d.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")) == high
    assert (
        f"{len(pairs)} pairs in all; {high} match the filter; {high} shown."
        in d.find_element(By.ID, "table-count").text
    )
    d.execute_script(
        "var f = document.getElementById('filter-min'); f.value = 0;"
        "f.dispatchEvent(new Event('input'));"
        "var p = document.getElementById('filter-path'); p.value = 'part.txt';"
        "p.dispatchEvent(new Event('input'));"
    )
    rows = d.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")
    assert rows and len(rows) == sum("part.txt" in p[0] + p[1] for p in pairs)
    assert all("part.txt" in r.text for r in rows)
    d.execute_script(
        "var p = document.getElementById('filter-path'); p.value = '';"
        "p.dispatchEvent(new Event('input'));"
    )
    d.find_element(By.CSS_SELECTOR, '#pairs th[data-col="0"]').click()  # by A, ascending
    firsts = [
        r.find_element(By.CSS_SELECTOR, "td:nth-child(2)").text
        for r in d.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")
    ]
    assert firsts == sorted(firsts) and len(firsts) == len(pairs)
    # A row opens its pair, with the passages.
    viewer = d.find_element(By.ID, "viewer")
    assert not viewer.is_displayed()
    k = data["explained"][0]
    d.find_element(By.CSS_SELECTOR, f'#pairs tbody tr[data-pair="{k}"]').click()
    assert viewer.is_displayed()
    shown = d.find_element(By.ID, "viewer-body").text
    assert "shared passages" in shown and data["pairs"][k][0] in shown
    # A passage button scrolls both panes to it.
    d.find_element(By.CSS_SELECTOR, "#viewer-body .pbtn").click()
    assert len(d.find_elements(By.CSS_SELECTOR, "#viewer-body .p.hit")) >= 2
    # So does an edge: the viewer shows that edge's pair.
    pair = d.execute_script(
        "var e = window.sifReport.cy.edges()[0]; e.emit('tap'); return e.data('pair');"
    )
    assert d.find_element(By.ID, "viewer").get_attribute("data-pair") == str(pair)
    d.save_screenshot(str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000
    logs = d.get_log("browser")
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []


def test_the_explain_page_works_in_chromium(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    a, b, _ = spliced(tmp_path)
    page = tmp_path / "pair.html"
    assert sif("explain", "--format", "html", "-o", page, a, b).returncode == 0
    browser.get(page.as_uri())
    panes = browser.find_elements(By.CSS_SELECTOR, ".pane pre")
    assert len(panes) == 2
    browser.find_element(By.CSS_SELECTOR, '.pbtn[data-p="2"]').click()
    # Both panes scrolled to passage 2 (in B it is far down; in A it is passage 1's text).
    tops = browser.execute_script(
        "return Array.from(document.querySelectorAll('.pane pre')).map(p => p.scrollTop)"
    )
    assert tops[1] > 0
    for side in "ab":  # in A the passage is also passage 1 (P1 is twice in B)
        hits = browser.find_elements(By.CSS_SELECTOR, f'.pane[data-side="{side}"] .p.hit')
        assert hits and all(h.get_attribute("data-p").split().count("2") for h in hits)
    browser.save_screenshot(str(tmp_path / "pair.png"))
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []


def test_a_name_that_is_not_utf8_is_shown_escaped_and_its_passages_embedded(
    tmp_path: Path,
) -> None:
    """A file whose name is not valid UTF-8: the page stays valid UTF-8 and shows the name
    in the shell's $'...' quoting, as the text reports do, in the table, the data and the
    embedded passages (the file itself was opened by its own name to find them)."""
    root = tmp_path / "tree"
    a = text(1, 20_000)
    write(root / "a.txt", a)
    odd = os.fsencode(root) + b"/caf\xe9.txt"
    with open(odd, "wb") as f:
        f.write(a[:15_000] + text(3, 5_000))
    out = tmp_path / "report.html"
    run = subprocess.run(
        [*SIF, "similar", "-q", "--index", tmp_path / "idx", "--format", "html", "-o", out, root],
        capture_output=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    page = out.read_bytes().decode("utf-8")  # raises on a raw \xe9
    shown = "$'" + str(root) + "/caf\\xe9.txt'"
    [pair] = data_of(page)["pairs"]
    assert shown in pair[:2] and str(root / "a.txt") in pair[:2]
    assert data_of(page)["explained"] == [0]  # its passages are in the page
    titles = re.findall(r'<div class="pane-title">[AB] ([^<]*)</div>', page)
    assert html.escape(shown, quote=True) in titles


def test_names_that_look_like_markup_or_are_not_utf8_keep_the_pages_data_readable() -> None:
    """Paths holding ``<!--``, ``</script>``, ``<script>`` and undecodable bytes: the page's
    data block is JSON that parses (``<\\!--`` was not, and stopped every script of the
    page) to the shown names, and each graph node's label is its name's last part,
    quoted as the name is."""
    from sif.html.report import ReportPair, render_report

    odd = os.fsdecode(b"/t/d\xfe/caf\xe9.txt")
    names = ["/t/a<!--b.txt", "/t/</script><script>x.txt", odd, "/t/plain.txt"]
    pairs = [
        ReportPair(names[k], names[k + 1], 900, 1_000, "text", 80.0, 0.9, 0.8, True, False)
        for k in range(len(names) - 1)
    ]
    page = render_report("t", [], pairs)
    page.encode("utf-8")  # no surrogate: raises if a raw name got in
    assert "<!--b" not in page.split('id="sif-data">')[1].split("</script>")[0]
    data = data_of(page)
    shown = ["/t/a<!--b.txt", "/t/</script><script>x.txt", "$'/t/d\\xfe/caf\\xe9.txt'"]
    shown.append("/t/plain.txt")
    assert [p[:2] for p in data["pairs"]] == [shown[k : k + 2] for k in range(3)]
    labels = {n["id"]: n["label"] for n in data["graph"]["nodes"]}
    assert labels[shown[2]] == "$'caf\\xe9.txt'" and labels["/t/a<!--b.txt"] == "a<!--b.txt"
