// One view at a time: #overview or #TASK. Without JavaScript every view is shown, one after the other.
function showView() {
  var id = decodeURIComponent(location.hash.slice(1)) || 'overview';
  var views = document.querySelectorAll('section.view');
  var found = false;
  views.forEach(function (v) { if (v.id === id) { found = true; } });
  if (!found) { id = 'overview'; }
  views.forEach(function (v) { v.hidden = v.id !== id; });
  document.querySelectorAll('nav a').forEach(function (a) {
    a.classList.toggle('current', a.getAttribute('data-view') === id);
  });
}
window.addEventListener('hashchange', showView);
showView();

// Sortable tables: click a header; numbers compare as numbers (data-value), the rest as text.
document.querySelectorAll('table.board').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var asc = !th.classList.contains('sorted-asc');
      table.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-value'), y = b.cells[col].getAttribute('data-value');
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
