// Endcap console: the performance charts (uPlot), drawn from the JSON the
// page carries in #chart-data. The time taken is kept on document.body as
// data-chart-ms for the browser tests.
(function () {
  "use strict";
  var el = document.getElementById("chart-data");
  if (!el || !window.uPlot) return;
  var t0 = performance.now();
  var d = JSON.parse(el.textContent);
  var charts = [];
  function width(node) { return Math.max(260, node.clientWidth || 600); }
  // Axis labels: 1,234 / 12.3k / 4.5M, so that they fit the axis.
  function compact(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    return String(Math.round(v * 100) / 100);
  }
  function axis(o) {
    o = o || {};
    o.size = 56;
    o.values = function (u, ticks) { return ticks.map(compact); };
    return o;
  }
  // Points on the lines only when the days are few enough to tell apart.
  var dots = d.x.length <= 31;
  function draw(id, series, data, axes) {
    var node = document.getElementById(id);
    if (!node) return;
    var opts = {
      width: width(node), height: 240,
      scales: { x: { time: true } },
      series: [{ label: "Day", value: "{YYYY}-{MM}-{DD}" }].concat(series),
      axes: [{}].concat((axes || [{}]).map(axis)),
      legend: { live: true },
    };
    charts.push({ node: node, plot: new uPlot(opts, [d.x].concat(data), node) });
  }
  var blue = "#0b4fa8", orange = "#b34700", green = "#146c2e", purple = "#6a1b9a";
  draw("chart-traffic",
    [{ label: "Impressions", stroke: blue, width: 2, scale: "imp" }, { label: "Clicks", stroke: orange, width: 2, scale: "clk" }],
    [d.impressions, d.clicks],
    [{ scale: "imp" }, { scale: "clk", side: 1, grid: { show: false } }]);
  draw("chart-money",
    [{ label: "Spend", stroke: blue, width: 2, value: function (u, v) { return v == null ? "—" : v.toFixed(2); } },
     { label: "Sales", stroke: green, width: 2, value: function (u, v) { return v == null ? "—" : v.toFixed(2); } }],
    [d.spend, d.sales]);
  draw("chart-ratios",
    [{ label: "ROAS", stroke: green, width: 2, scale: "roas", points: { show: dots, size: 6 }, value: function (u, v) { return v == null ? "—" : v.toFixed(2); } },
     { label: "ACOS %", stroke: purple, width: 2, scale: "acos", points: { show: dots, size: 6 }, value: function (u, v) { return v == null ? "—" : v.toFixed(1) + " %"; } }],
    [d.roas, d.acos],
    [{ scale: "roas" }, { scale: "acos", side: 1, grid: { show: false } }]);
  document.body.setAttribute("data-chart-ms", String(Math.round((performance.now() - t0) * 10) / 10));
  document.body.setAttribute("data-chart-points", String(d.x.length));
  var resize;
  window.addEventListener("resize", function () {
    clearTimeout(resize);
    resize = setTimeout(function () {
      charts.forEach(function (c) { c.plot.setSize({ width: width(c.node), height: 240 }); });
    }, 100);
  });
})();
