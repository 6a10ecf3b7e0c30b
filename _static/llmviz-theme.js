/* Plotly figures follow the site's light/dark theme.
 *
 * sphinx-book-theme (pydata) sets data-theme="light" | "dark" on <html>. On load and whenever
 * it changes, every plotly figure on the page gets the matching paper, plot, font and grid
 * colours; switching back restores what the figure had. Served by the site (no CDN). */
(function () {
  "use strict";
  var DARK = {
    paper: "rgba(0,0,0,0)", plot: "rgba(0,0,0,0)", font: "#ced6dd",
    grid: "#3a4048", zeroline: "#5a6270", line: "#5a6270",
    sliderBg: "#2b3036", sliderActive: "#4a5058", sliderBorder: "#5a6270"
  };
  var AXIS = /^[xy]axis\d*$/;

  function mode() {
    return document.documentElement.getAttribute("data-theme") === "dark" ? "dark" : "light";
  }

  function get(obj, path) {
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (obj === undefined || obj === null) { return undefined; }
      obj = obj[parts[i]];
    }
    return obj;
  }

  function darkUpdate(gd) {
    var full = gd._fullLayout || {};
    var up = {
      "paper_bgcolor": DARK.paper, "plot_bgcolor": DARK.plot, "font.color": DARK.font
    };
    Object.keys(full).forEach(function (key) {
      if (!AXIS.test(key)) { return; }
      up[key + ".gridcolor"] = DARK.grid;
      up[key + ".zerolinecolor"] = DARK.zeroline;
      up[key + ".linecolor"] = DARK.line;
    });
    (gd.layout.sliders || []).forEach(function (_, i) {
      up["sliders[" + i + "].bgcolor"] = DARK.sliderBg;
      up["sliders[" + i + "].activebgcolor"] = DARK.sliderActive;
      up["sliders[" + i + "].bordercolor"] = DARK.sliderBorder;
      up["sliders[" + i + "].font.color"] = DARK.font;
    });
    (gd.layout.annotations || []).forEach(function (a, i) {
      if (a.font && a.font.color) { up["annotations[" + i + "].font.color"] = DARK.font; }
    });
    return up;
  }

  function apply(gd) {
    if (!window.Plotly || !gd.layout) { return; }
    var want = mode();
    var has = gd.getAttribute("data-llmviz-theme") || "light";
    if (want === has) { return; }
    var up;
    if (want === "dark") {
      up = darkUpdate(gd);
      var saved = {};  // what the figure had, restored when the page goes light again
      Object.keys(up).forEach(function (k) {
        var v = get(gd.layout, k.replace(/\[(\d+)\]/g, ".$1"));
        saved[k] = v === undefined ? null : v;
      });
      gd.__llmvizLight = saved;
    } else {
      up = gd.__llmvizLight || {};
    }
    gd.setAttribute("data-llmviz-theme", want);
    window.Plotly.relayout(gd, up);
  }

  function applyAll() {
    var figs = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < figs.length; i++) { apply(figs[i]); }
  }

  function start() {
    applyAll();
    new MutationObserver(applyAll).observe(document.documentElement, {
      attributes: true, attributeFilter: ["data-theme"]
    });
  }

  if (document.readyState === "complete") { start(); }
  else { window.addEventListener("load", start); }
})();
