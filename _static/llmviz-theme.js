/* Plotly figures follow the site's light/dark theme, and their titles fit their width.
 *
 * sphinx-book-theme (pydata) sets data-theme="light" | "dark" on <html>. On load and whenever
 * it changes, every plotly figure on the page gets the matching colours: paper, plot areas,
 * font, grids, legend and annotation boxes, 3-D scenes and polar areas, sliders; switching back
 * restores what the figure had. A figure's own later relayout (an explorer's frame) that puts a
 * light colour back is answered, after it draws, by a relayout of just the keys that lost their
 * dark value: the comparison is on the values this script set in the figure's layout, so it
 * settles after one step (never on derived colours, which a figure without a plot area lacks).
 * A title wider than its figure (a phone, or an explorer frame with a long title) gets a
 * smaller font until it fits. Served by the site (no CDN). */
(function () {
  "use strict";
  var DARK = {
    paper: "rgba(0,0,0,0)", plot: "rgba(0,0,0,0)", font: "#ced6dd",
    grid: "#3a4048", zeroline: "#5a6270", line: "#5a6270",
    box: "rgba(30,34,40,0.85)", boxBorder: "#5a6270", scene: "#1d2026",
    sliderBg: "#2b3036", sliderActive: "#4a5058", sliderBorder: "#5a6270"
  };
  var AXIS = /^[xy]axis\d*$/;
  var SCENE = /^scene\d*$/;
  var POLAR = /^(polar|ternary)\d*$/;
  var POLAR_AXES = ["radialaxis", "angularaxis", "aaxis", "baxis", "caxis"];

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
    Object.keys(full).forEach(function (key) {
      if (SCENE.test(key)) {  // 3-D: each axis draws its own wall, white in the light template
        ["xaxis", "yaxis", "zaxis"].forEach(function (ax) {
          var k = key + "." + ax;
          up[k + ".backgroundcolor"] = DARK.scene;
          up[k + ".gridcolor"] = DARK.grid;
          up[k + ".zerolinecolor"] = DARK.zeroline;
          up[k + ".linecolor"] = DARK.line;
          up[k + ".color"] = DARK.font;
        });
        up[key + ".bgcolor"] = DARK.paper;
      } else if (POLAR.test(key)) {
        up[key + ".bgcolor"] = DARK.plot;
        POLAR_AXES.forEach(function (ax) {
          if (!full[key][ax]) { return; }
          up[key + "." + ax + ".gridcolor"] = DARK.grid;
          up[key + "." + ax + ".linecolor"] = DARK.line;
          up[key + "." + ax + ".color"] = DARK.font;
        });
      }
    });
    var legend = gd.layout.legend || {};
    if (legend.bgcolor) { up["legend.bgcolor"] = DARK.box; }
    if (legend.bordercolor) { up["legend.bordercolor"] = DARK.boxBorder; }
    if (legend.font && legend.font.color) { up["legend.font.color"] = DARK.font; }
    (gd.layout.sliders || []).forEach(function (_, i) {
      up["sliders[" + i + "].bgcolor"] = DARK.sliderBg;
      up["sliders[" + i + "].activebgcolor"] = DARK.sliderActive;
      up["sliders[" + i + "].bordercolor"] = DARK.sliderBorder;
      up["sliders[" + i + "].font.color"] = DARK.font;
    });
    (gd.layout.annotations || []).forEach(function (a, i) {
      if (a.font && a.font.color) { up["annotations[" + i + "].font.color"] = DARK.font; }
      if (a.bgcolor) { up["annotations[" + i + "].bgcolor"] = DARK.box; }
      if (a.bordercolor) { up["annotations[" + i + "].bordercolor"] = DARK.boxBorder; }
    });
    var title = gd.layout.title || {};
    if (title.font && title.font.color) { up["title.font.color"] = DARK.font; }
    return up;
  }

  function path(k) { return k.replace(/\[(\d+)\]/g, ".$1"); }

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
        var v = get(gd.layout, path(k));
        saved[k] = v === undefined ? null : v;
      });
      gd.__llmvizLight = saved;
    } else {
      up = gd.__llmvizLight || {};
    }
    gd.setAttribute("data-llmviz-theme", want);
    window.Plotly.relayout(gd, up);
  }

  // After a dark figure draws again: the keys whose dark value its own relayout replaced (an
  // explorer frame's annotations, say) get it back; what they held becomes the light value.
  // Nothing is done when every key still holds its dark value, so this cannot loop.
  function keepDark(gd) {
    if (!window.Plotly || !gd.layout || mode() !== "dark" ||
        gd.getAttribute("data-llmviz-theme") !== "dark") { return; }
    var want = darkUpdate(gd), up = {}, saved = gd.__llmvizLight || {}, n = 0;
    Object.keys(want).forEach(function (k) {
      var v = get(gd.layout, path(k));
      if (v === want[k]) { return; }
      saved[k] = v === undefined ? null : v;
      up[k] = want[k];
      n++;
    });
    gd.__llmvizLight = saved;
    if (n) { window.Plotly.relayout(gd, up); }
  }

  var MIN_TITLE_PX = 9;
  var WRAP_TITLE_PX = 11;

  function fitTitle(gd) {
    var title = gd.querySelector(".gtitle");
    var svg = gd.querySelector(".main-svg");
    if (!window.Plotly || !title || !svg || !gd._fullLayout) { return; }
    var avail = svg.getBoundingClientRect().width - 16;
    var r = title.getBoundingClientRect();
    var size = gd._fullLayout.title.font.size;
    if (avail <= 0 || r.width === 0) { return; }
    var box = svg.getBoundingClientRect();
    var offside = r.left < box.left || r.right > box.right - 2;  // fits, but centred off the edge
    var overflow = r.width > avail || offside;
    var natural = gd.__llmvizTitleSize;
    if (!overflow && !(natural && size < natural && r.width * natural / size < avail)) { return; }
    if (!natural) { gd.__llmvizTitleSize = natural = size; }
    var fit = Math.floor(size * avail / r.width);
    var want = Math.max(MIN_TITLE_PX, Math.min(natural, fit));
    var up = {"title.font.size": want};
    var text = gd.layout.title && gd.layout.title.text;
    if (fit < MIN_TITLE_PX && typeof text === "string" && text.indexOf("<br>") < 0) {
      // Still too wide at the smallest size: wrap it at spaces into lines that fit at
      // WRAP_TITLE_PX (about 0.6 em per character).
      var perLine = Math.max(12, Math.floor(avail / (0.6 * WRAP_TITLE_PX)));
      var lines = [], line = "";
      text.split(" ").forEach(function (word) {
        if (line && (line + " " + word).length > perLine) { lines.push(line); line = word; }
        else { line = line ? line + " " + word : word; }
      });
      if (line) { lines.push(line); }
      if (lines.length > 1) {
        up["title.text"] = lines.join("<br>");
        up["title.font.size"] = Math.min(natural, WRAP_TITLE_PX);
        if (gd.__llmvizMarginT === undefined) { gd.__llmvizMarginT = gd._fullLayout.margin.t; }
        up["margin.t"] = gd.__llmvizMarginT + (lines.length - 1) * (WRAP_TITLE_PX + 4);
      }
    } else if (want === size && !offside) { return; }
    if (offside || want < natural) {
      up["title.x"] = 0.02; up["title.xanchor"] = "left";  // fit from the left edge
    }
    window.Plotly.relayout(gd, up);
  }

  // Sliders sit a fixed distance below the plot area; long or rotated tick labels can push an
  // x-axis title down onto the first slider. Measure, and move every slider (and the bottom
  // margin) down by the overlap.
  function clearSliders(gd) {
    if (!window.Plotly || !gd._fullLayout || !(gd.layout.sliders || []).length) { return; }
    var sliders = gd.querySelectorAll(".slider-container");
    var titles = gd.querySelectorAll('[class^="g-x"][class$="title"]');
    if (!sliders.length || !titles.length) { return; }
    var top = Infinity, bottom = -Infinity;
    sliders.forEach(function (s) { top = Math.min(top, s.getBoundingClientRect().top); });
    titles.forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width) { bottom = Math.max(bottom, r.bottom); }
    });
    var need = Math.ceil(bottom - top) + 6;
    if (!(need > 0) || need > 400) { return; }
    var up = {"margin.b": gd._fullLayout.margin.b + need,
              "height": gd._fullLayout.height + need};
    gd.layout.sliders.forEach(function (sl, i) {
      up["sliders[" + i + "].pad.t"] = ((sl.pad && sl.pad.t) || 0) + need;
    });
    window.Plotly.relayout(gd, up);
  }

  function hook(gd) {
    if (gd.__llmvizHooked || !gd.on) { return; }
    gd.__llmvizHooked = true;
    gd.on("plotly_afterplot", function () { keepDark(gd); fitTitle(gd); clearSliders(gd); });
  }

  function applyAll() {
    var figs = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < figs.length; i++) {
      apply(figs[i]); hook(figs[i]); fitTitle(figs[i]); clearSliders(figs[i]);
    }
  }

  function start() {
    applyAll();
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(applyAll, 250);
    });
    new MutationObserver(applyAll).observe(document.documentElement, {
      attributes: true, attributeFilter: ["data-theme"]
    });
  }

  if (document.readyState === "complete") { start(); }
  else { window.addEventListener("load", start); }
})();
