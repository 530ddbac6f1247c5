// Endcap console: the few things a page does with JavaScript. Every page
// works without it.
(function () {
  "use strict";
  // A confirmation before a form that cannot be undone (revoke, disable).
  document.querySelectorAll("form.confirm").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm") || "Are you sure?")) e.preventDefault();
    });
  });
  // Copy buttons: copy the named field's value.
  document.querySelectorAll("button[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var el = document.getElementById(b.getAttribute("data-copy"));
      if (!el) return;
      el.select();
      var done = function () { b.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(el.value).then(done, function () {});
      else { try { document.execCommand("copy"); done(); } catch (e) { /* select() left it selected */ } }
    });
  });
  // A list that is still changing (exports pending or running): read the
  // page again every few seconds and replace the list only, so that a form
  // being filled in is left alone. Stops once nothing is pending.
  var live = document.querySelector("[data-refresh]");
  if (live && window.fetch && window.DOMParser) {
    var every = Math.max(2, parseInt(live.getAttribute("data-refresh"), 10) || 5) * 1000;
    var tick = function () {
      fetch(window.location.pathname + window.location.search, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var next = new DOMParser().parseFromString(html, "text/html").getElementById(live.id);
          if (!next) return;
          live.innerHTML = next.innerHTML;
          if (next.hasAttribute("data-refresh")) window.setTimeout(tick, every);
          else live.removeAttribute("data-refresh");
        }, function () { window.setTimeout(tick, every * 2); });
    };
    window.setTimeout(tick, every);
  }
})();
