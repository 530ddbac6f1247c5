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
})();
