// The runs list: sort by a column (click its header), filter rows by text, and check that a
// comparison names two runs before the form is sent. Written for this page; no library.
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) return;
  var body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;

  function key(row, col, numeric) {
    var cell = row.cells[col];
    var raw = cell.hasAttribute("data-key") ? cell.getAttribute("data-key") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var v = parseFloat(raw);
    return isNaN(v) ? null : v;
  }

  Array.prototype.forEach.call(heads, function (th, col) {
    var kind = th.getAttribute("data-sort");
    if (!kind) return;
    th.addEventListener("click", function () {
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a, col, kind === "num"), y = key(b, col, kind === "num");
        // Rows without a value go last whichever way the column is sorted.
        if (x === null || x === "") return (y === null || y === "") ? 0 : 1;
        if (y === null || y === "") return -1;
        var c = x < y ? -1 : x > y ? 1 : 0;
        return ascending ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });

  var filter = document.getElementById("filter");
  var shown = document.getElementById("shown");
  filter.addEventListener("input", function () {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var n = 0;
    Array.prototype.forEach.call(body.rows, function (row) {
      var text = row.textContent.toLowerCase();
      var keep = words.every(function (w) { return text.indexOf(w) !== -1; });
      row.hidden = !keep;
      if (keep) n += 1;
    });
    shown.textContent = n + " of " + body.rows.length + " folder(s)";
  });

  document.getElementById("pick").addEventListener("submit", function (e) {
    var a = this.querySelector("input[name=a]:checked");
    var b = this.querySelector("input[name=b]:checked");
    if (!a || !b || a.value === b.value) {
      e.preventDefault();
      shown.textContent = "pick run A and a different run B in the first two columns";
    }
  });
})();
