// The flame graph's two interactions: a tab per thread group, and a click on a frame to zoom into it
// (its ancestors stretch across the top, everything outside it is hidden; the top bar zooms out).
// The frames are drawn server-side as SVG; this only moves and relabels them.
(function () {
  "use strict";
  var root = document.getElementById("flamegraph");
  if (!root) return;
  var WIDTH = 1000, CHAR = 6.4, PAD = 3;
  var status = root.querySelector(".flame-status");
  var tabs = root.querySelectorAll("button[data-thread]");
  var panes = root.querySelectorAll(".flame-pane");

  function show(thread) {
    tabs.forEach(function (tab) { tab.setAttribute("aria-selected", String(tab.dataset.thread === thread)); });
    panes.forEach(function (pane) { pane.hidden = pane.dataset.thread !== thread; });
  }

  function fit(name, width) {
    var chars = Math.floor((width - 2 * PAD) / CHAR);
    if (chars < 5) return "";
    // The end of a name says most ("\u2026run_layers"): shorten from the left, as the server-side layout does.
    return name.length <= chars ? name : "\u2026" + name.slice(name.length - chars + 1);
  }

  function zoom(svg, target) {
    // data-x and data-w carry six significant digits, so edges compare within a rounding step; frames
    // narrower than 0.1% of the thread are never drawn, so this cannot mistake a neighbour for a child.
    var x0 = +target.dataset.x, w = +target.dataset.w, depth = +target.dataset.depth, eps = 1e-5;
    svg.querySelectorAll("g.frame").forEach(function (frame) {
      var x = +frame.dataset.x, fw = +frame.dataset.w, d = +frame.dataset.depth;
      var ancestor = d < depth && x <= x0 + eps && x + fw >= x0 + w - eps;
      var inside = depth === 0 || (d >= depth && x >= x0 - eps && x + fw <= x0 + w + eps);
      if (!ancestor && !inside) { frame.style.display = "none"; return; }
      frame.style.display = "";
      var left = ancestor ? 0 : (x - x0) / w * WIDTH, width = ancestor ? WIDTH : fw / w * WIDTH;
      var rect = frame.querySelector("rect"), text = frame.querySelector("text");
      rect.setAttribute("x", left.toFixed(2));
      rect.setAttribute("width", Math.max(width - 0.5, 0.1).toFixed(2));
      if (text) {
        text.setAttribute("x", (left + PAD).toFixed(2));
        text.textContent = fit(frame.dataset.name, width);
      }
    });
    svg.dataset.zoomed = depth === 0 ? "" : target.dataset.name;
    if (status) {
      status.textContent = depth === 0 ? "Whole thread shown. Click a frame to zoom in."
        : "Zoomed into " + target.dataset.name + (target.dataset.where ? " (" + target.dataset.where + ")" : "")
          + ": " + target.dataset.share + " of the thread's samples. Click the top bar to zoom out.";
    }
  }

  tabs.forEach(function (tab) { tab.addEventListener("click", function () { show(tab.dataset.thread); }); });
  root.querySelectorAll("svg.flame").forEach(function (svg) {
    svg.addEventListener("click", function (event) {
      var frame = event.target.closest("g.frame");
      if (frame) zoom(svg, frame);
    });
  });
})();
