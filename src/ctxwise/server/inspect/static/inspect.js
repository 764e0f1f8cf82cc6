// The ledger table's filters (fate, tool, text): the one thing on these pages that needs
// JavaScript. Rows are hidden or shown in place; nothing is fetched.
(function () {
  "use strict";
  function setup() {
    var table = document.getElementById("ledger-table");
    if (!table) { return; }
    var form = document.getElementById("filters");
    var fate = document.getElementById("filter-fate");
    var tool = document.getElementById("filter-tool");
    var text = document.getElementById("filter-text");
    var shown = document.getElementById("shown");
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    function apply() {
      var f = fate.value, t = tool.value, q = text.value.trim().toLowerCase();
      var n = 0;
      rows.forEach(function (row) {
        var tools = row.getAttribute("data-tools");
        var ok = (!f || row.getAttribute("data-fate") === f) &&
          (!t || (tools ? tools.split("|") : []).indexOf(t) >= 0) &&
          (!q || row.textContent.toLowerCase().indexOf(q) >= 0);
        row.hidden = !ok;
        if (ok) { n += 1; }
      });
      shown.textContent = n + " of " + rows.length + " shown";
    }
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    fate.addEventListener("change", apply);
    tool.addEventListener("change", apply);
    text.addEventListener("input", apply);
    apply();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
