// Endcap console: draws the charts a page describes in #chart-data (uPlot):
// [{id, x: [unix seconds], time, tz, series: [{label, values, axis: "left"|"right", color, format}]}]
// (api/console/charts.go). The time taken is kept on document.body as data-chart-ms, and each chart's time-axis
// labels on its node as data-x-labels (the browser tests read them).
(function () {
  "use strict";
  var el = document.getElementById("chart-data");
  if (!el || !window.uPlot) return;
  var t0 = performance.now();
  var specs = JSON.parse(el.textContent);
  var plots = [];
  function width(node) { return Math.max(260, node.clientWidth || 600); }
  // Axis labels: 1234 / 12.3k / 4.5M, so that they fit the axis.
  function compact(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    return String(Math.round(v * 100) / 100);
  }
  var isoDay = uPlot.fmtDate("{YYYY}-{MM}-{DD}"), monthDay = uPlot.fmtDate("{MM}-{DD}"),
    dayTime = uPlot.fmtDate("{MM}-{DD} {HH}:{mm}"), hourMin = uPlot.fmtDate("{HH}:{mm}"),
    endOfDay = function () { return "24:00"; };
  var formats = {
    int: function (v) { return Math.round(v).toLocaleString("en"); },
    money: function (v) { return v.toFixed(2); },
    ratio: function (v) { return v.toFixed(2); },
    pct: function (v) { return v.toFixed(1) + " %"; },
  };
  specs.forEach(function (spec) {
    var node = document.getElementById(spec.id);
    if (!node) return;
    // Points on the lines only when the days are few enough to tell apart.
    var dots = spec.x.length <= 31;
    var series = [spec.time ? { label: "Time", value: "{HH}:{mm}" } : { label: "Day", value: "{YYYY}-{MM}-{DD}" }];
    // The time axis in 24-hour time and ISO dates (uPlot's own labels are
    // 12-hour, month/day), in the marketplace's zone.
    var toDate = spec.tz ? function (ts) { return uPlot.tzDate(new Date(ts * 1e3), spec.tz); } : function (ts) { return new Date(ts * 1e3); };
    // A label says the date (days: the year) where it changes from the
    // previous one, and at the first; the midnight that ends the chart is
    // 24:00.
    // Ticks far enough apart for the widest label (a full date and time),
    // so that the first one, which names the date, does not run into the next.
    var axes = [{ space: spec.time ? 96 : 84, values: function (u, splits, ax, space, incr) {
      var prev = null;
      return splits.map(function (ts, i) {
        var d = toDate(ts), f;
        if (incr >= 86400) f = !prev || prev.getFullYear() !== d.getFullYear() ? isoDay : monthDay;
        else if (prev && i === splits.length - 1 && d.getHours() === 0 && d.getMinutes() === 0) f = endOfDay;
        else f = !prev || prev.toDateString() !== d.toDateString() ? dayTime : hourMin;
        prev = d;
        return f(d);
      });
    } }];
    var scales = { x: { time: true } };
    var sides = {};
    spec.series.forEach(function (s) {
      var side = s.axis === "right" ? "right" : "left";
      var f = formats[s.format] || formats.ratio;
      series.push({ label: s.label, stroke: s.color, width: 2, scale: side, points: { show: dots, size: 5 },
        value: function (u, v) { return v == null ? "—" : f(v); } });
      if (!sides[side]) {
        sides[side] = true;
        // Counts and amounts start at zero, so that a small figure is not
        // drawn as large.
        scales[side] = { range: function (u, min, max) { return [Math.min(0, min), max > 0 ? max * 1.08 : 1]; } };
        axes.push({ scale: side, side: side === "right" ? 1 : 3, size: 56, grid: { show: side === "left" },
          values: function (u, ticks) { return ticks.map(compact); } });
      }
    });
    var data = [spec.x].concat(spec.series.map(function (s) { return s.values; }));
    var opts = { width: width(node), height: 240, scales: scales, series: series, axes: axes, legend: { live: true },
      // The time axis's labels as drawn, on the chart (the browser tests read them).
      // Whether two of them overlap, measured as drawn (data-x-overlap).
      hooks: { draw: [function (u) {
        var labels = u.axes[0]._values || [], splits = u.axes[0]._splits || [], ctx = u.ctx, overlap = false;
        ctx.save();
        ctx.font = u.axes[0].font[0];
        for (var i = 1; i < labels.length; i++) {
          var gap = u.valToPos(splits[i], "x") - u.valToPos(splits[i - 1], "x");
          if (gap * devicePixelRatio < (ctx.measureText(labels[i - 1]).width + ctx.measureText(labels[i]).width) / 2 + 4 * devicePixelRatio) overlap = true;
        }
        ctx.restore();
        node.setAttribute("data-x-labels", labels.join("|"));
        node.setAttribute("data-x-overlap", overlap ? "yes" : "no");
      }] } };
    // Times of day in the marketplace's zone, not the browser's.
    if (spec.tz) opts.tzDate = toDate;
    var plot = new uPlot(opts, data, node);
    plots.push({ node: node, plot: plot });
  });
  document.body.setAttribute("data-chart-ms", String(Math.round((performance.now() - t0) * 10) / 10));
  document.body.setAttribute("data-chart-points", String(specs.length ? specs[0].x.length : 0));
  var resize;
  window.addEventListener("resize", function () {
    clearTimeout(resize);
    resize = setTimeout(function () {
      plots.forEach(function (p) { p.plot.setSize({ width: width(p.node), height: 240 }); });
    }, 100);
  });
})();
