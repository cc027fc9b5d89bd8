/* sif: the report's table (sort, filter), graph (Cytoscape.js) and pair viewer. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("sif-data").textContent);
  var pairs = data.pairs; // [a, b, score, a_in_b, b_in_a, a_size, b_size, kind, exact, identical]
  var explained = {};
  data.explained.forEach(function (k) { explained[k] = true; });
  var PAGE = 500;
  var sortCol = 2, sortDesc = true;
  var tbody = document.querySelector("#pairs tbody");
  var count = document.getElementById("table-count");
  function $(id) { return document.getElementById(id); }
  function fmt(x, d) { return Number(x).toFixed(d); }
  function text(tag, s, cls) {
    var el = document.createElement(tag);
    el.textContent = s;
    if (cls) { el.className = cls; }
    return el;
  }
  function how(p) { return p[9] ? "exact copy" : (p[8] ? "exact" : "estimate"); }
  function renderTable() {
    var needle = $("filter-path").value.toLowerCase();
    var lo = parseFloat($("filter-min").value), hi = parseFloat($("filter-max").value);
    var kind = $("filter-kind").value;
    if (isNaN(lo)) { lo = 0; }
    if (isNaN(hi)) { hi = 100; }
    var rows = [];
    for (var k = 0; k < pairs.length; k++) {
      var p = pairs[k];
      if (p[2] < lo || p[2] > hi) { continue; }
      if (kind && p[7] !== kind) { continue; }
      if (needle && p[0].toLowerCase().indexOf(needle) < 0 && p[1].toLowerCase().indexOf(needle) < 0) { continue; }
      rows.push(k);
    }
    rows.sort(function (x, y) {
      var a = pairs[x][sortCol], b = pairs[y][sortCol];
      var c = a < b ? -1 : (a > b ? 1 : 0);
      return sortDesc ? -c : c;
    });
    var frag = document.createDocumentFragment();
    rows.slice(0, PAGE).forEach(function (k) {
      var p = pairs[k];
      var tr = document.createElement("tr");
      tr.setAttribute("data-pair", k);
      tr.appendChild(text("td", fmt(p[2], 1), "num"));
      tr.appendChild(text("td", p[0]));
      tr.appendChild(text("td", p[1]));
      tr.appendChild(text("td", fmt(100 * p[3], 1), "num"));
      tr.appendChild(text("td", fmt(100 * p[4], 1), "num"));
      tr.appendChild(text("td", p[5].toLocaleString("en"), "num"));
      tr.appendChild(text("td", p[6].toLocaleString("en"), "num"));
      tr.appendChild(text("td", p[7]));
      tr.appendChild(text("td", how(p)));
      if (explained[k]) { tr.classList.add("has-passages"); }
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    count.textContent = pairs.length.toLocaleString("en") + " pairs in all; " +
      rows.length.toLocaleString("en") + " match the filter; " +
      Math.min(PAGE, rows.length).toLocaleString("en") + " shown" +
      (rows.length > PAGE ? " (narrow the filter to see the others)" : "") + ".";
  }
  ["filter-path", "filter-min", "filter-max", "filter-kind"].forEach(function (id) {
    $(id).addEventListener("input", renderTable);
  });
  document.querySelectorAll("#pairs th[data-col]").forEach(function (th) {
    th.addEventListener("click", function () {
      var col = parseInt(th.getAttribute("data-col"), 10);
      if (col === sortCol) { sortDesc = !sortDesc; } else { sortCol = col; sortDesc = col >= 2 && col <= 6; }
      document.querySelectorAll("#pairs th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", sortDesc ? "descending" : "ascending");
      renderTable();
    });
  });
  tbody.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr[data-pair]");
    if (tr) { openPair(parseInt(tr.getAttribute("data-pair"), 10)); }
  });

  function openPair(k) {
    var p = pairs[k];
    var body = $("viewer-body");
    body.textContent = "";
    var src = document.querySelector("#pair-" + k + " .pair");
    if (src) {
      body.appendChild(src.cloneNode(true));
    } else {
      body.appendChild(text("p", p[0] + " \u2194 " + p[1] + " (" + fmt(p[2], 1) + "%): passages not embedded " +
        "(only the best pairs are); see them with:"));
      body.appendChild(text("pre", "sif explain '" + p[0].replace(/'/g, "'\\''") + "' '" + p[1].replace(/'/g, "'\\''") + "'"));
    }
    var viewer = $("viewer");
    viewer.hidden = false;
    viewer.setAttribute("data-pair", k);
    viewer.scrollIntoView();
  }
  $("viewer-close").addEventListener("click", function () { $("viewer").hidden = true; });

  var cy = null;
  var g = data.graph;
  function colour(c) { return "hsl(" + ((c * 137.508) % 360).toFixed(0) + ",65%,55%)"; }
  if (typeof cytoscape === "function" && g.nodes.length) {
    var elements = [];
    g.nodes.forEach(function (n) {
      elements.push({ data: { id: n.id, label: n.label + (n.count > 1 ? " \u00d7" + n.count : ""),
        colour: colour(n.cluster), count: n.count } });
    });
    g.edges.forEach(function (e, i) {
      elements.push({ data: { id: "e" + i, source: e.s, target: e.t, score: e.score, pair: e.pair,
        width: 1 + 4 * e.score / 100 } });
    });
    cy = cytoscape({
      container: $("graph"),
      elements: elements,
      style: [
        { selector: "node", style: { "background-color": "data(colour)", label: "data(label)",
          "font-size": 9, "text-valign": "bottom", "text-halign": "center", width: 14, height: 14 } },
        { selector: "node[count > 1]", style: { shape: "round-rectangle", width: 22, height: 22,
          "border-width": 2, "border-color": "#333" } },
        { selector: "edge", style: { width: "data(width)", "curve-style": "bezier",
          "target-arrow-shape": "triangle", "line-color": "#999", "target-arrow-color": "#999",
          "arrow-scale": 0.8 } },
        { selector: "edge:selected", style: { "line-color": "#c00", "target-arrow-color": "#c00" } }
      ],
      layout: g.nodes.length <= 400 ? { name: "cose", animate: false, randomize: false, numIter: 600 }
                                    : { name: "grid" }
    });
    cy.on("tap", "edge", function (ev) { openPair(ev.target.data("pair")); });
    cy.on("tap", "node", function (ev) {
      $("filter-path").value = ev.target.id();
      renderTable();
    });
  }
  var slider = $("threshold");
  var scores = pairs.map(function (p) { return p[2]; });
  var least = scores.length ? Math.floor(Math.min.apply(null, scores)) : 0;
  slider.min = String(least);
  slider.value = String(least);
  function applyThreshold() {
    var t = parseFloat(slider.value);
    $("threshold-value").textContent = String(t);
    if (!cy) { $("graph-count").textContent = "no graph"; return; }
    var shown = 0;
    cy.batch(function () {
      cy.edges().forEach(function (e) {
        var on = e.data("score") >= t;
        e.style("display", on ? "element" : "none");
        if (on) { shown++; }
      });
      cy.nodes().forEach(function (n) {
        var on = n.data("count") > 1 || n.connectedEdges().some(function (e) { return e.data("score") >= t; });
        n.style("display", on ? "element" : "none");
      });
    });
    $("graph-count").textContent = shown + " of " + g.edges.length + " drawn edges at or above " + t +
      "% (" + g.edges_total + " pairs of nodes; at most " + g.per_node + " edges a node)";
  }
  slider.addEventListener("input", applyThreshold);
  applyThreshold();
  renderTable();
  window.sifReport = { cy: cy, openPair: openPair, renderTable: renderTable, applyThreshold: applyThreshold };
})();
