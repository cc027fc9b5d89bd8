/* sif: click a passage (its button or its text) to scroll both panes of its pair to it. */
(function () {
  "use strict";
  function show(pair, pid) {
    pair.querySelectorAll(".hit").forEach(function (el) { el.classList.remove("hit"); });
    pair.querySelectorAll(".pane pre").forEach(function (pre) {
      var el = pre.querySelector('.p[data-p~="' + pid + '"]');
      if (el) {
        pre.scrollTop = Math.max(0, el.offsetTop - pre.offsetTop - 40);
        pre.querySelectorAll('.p[data-p~="' + pid + '"]').forEach(function (x) { x.classList.add("hit"); });
      }
    });
    var btn = pair.querySelector('.pbtn[data-p="' + pid + '"]');
    if (btn) { btn.classList.add("hit"); }
  }
  document.addEventListener("click", function (ev) {
    var target = ev.target.closest ? ev.target.closest("[data-p]") : null;
    if (!target) { return; }
    var pair = target.closest(".pair");
    if (pair) { show(pair, target.getAttribute("data-p").split(" ")[0]); }
  });
  window.sifShowPassage = show;
})();
