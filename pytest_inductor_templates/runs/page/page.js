// The grid of a pytest-inductor-templates page: rows from the embedded JSON, sorted and filtered here.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("grid-data").textContent);
  var columns = data.columns, rows = data.rows, stories = data.stories;
  var table = document.getElementById("grid"), body = table.tBodies[0];
  var state = { column: -1, dir: 1, figure: 0, outcome: "", template: "", text: "" };
  var order = rows.map(function (_, i) { return i; });
  var haystacks = null;

  function isCell(c) { return columns[c].kind === "cell"; }
  function visible(c) {
    return !(isCell(c) && data.templateFilter === "column" && state.template && columns[c].label !== state.template);
  }
  function key(row, c) {
    var cell = row[c];
    if (!isCell(c)) return typeof cell === "string" ? cell : cell[3];
    var figure = columns[c].numeric ? 0 : state.figure;
    return cell === null ? null : cell[3 + figure];
  }
  function compare(a, b) {
    var x = key(rows[a], state.column), y = key(rows[b], state.column);
    if (x === y) return a - b;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    var d = typeof x === "string" ? x.localeCompare(y) : x - y;
    return d === 0 ? a - b : d * state.dir;
  }
  function haystack(i) {
    return rows[i].map(function (cell) {
      return cell === null ? "" : typeof cell === "string" ? cell : cell[1];
    }).join(" ").toLowerCase();
  }
  function matches(i) {
    var row = rows[i];
    if (state.template && data.templateFilter === "row" && row[0] !== state.template) return false;
    if (state.outcome) {
      var found = false;
      for (var c = 0; c < columns.length && !found; c++) {
        if (!isCell(c) || !visible(c) || row[c] === null) continue;
        var tag = row[c][0];
        found = tag === state.outcome || (state.outcome === "failing" && data.failing.indexOf(tag) >= 0);
      }
      if (!found) return false;
    }
    if (state.text) {
      if (haystacks === null) haystacks = rows.map(function (_, j) { return haystack(j); });
      if (haystacks[i].indexOf(state.text) < 0) return false;
    }
    return true;
  }
  function cellHtml(cell, c) {
    if (cell === null) return '<td class="none">-</td>';
    if (typeof cell === "string") return '<td class="name">' + cell + "</td>";
    var cls = cell[0] === null ? "" : data.classes[cell[0]] || "";
    if (cell[2] !== null) return '<td class="' + cls + ' story" data-story="' + cell[2] + '">' + cell[1] + "</td>";
    return '<td class="' + cls + '">' + cell[1] + "</td>";
  }
  var WINDOW = 200, matched = [], painted = 0, shown = [];
  var more = document.getElementById("more");
  function paintMore() {
    var end = Math.min(matched.length, painted + WINDOW), html = [];
    for (var n = painted; n < end; n++) {
      var row = rows[matched[n]], parts = ["<tr>"];
      for (var k = 0; k < row.length; k++) if (shown[k]) parts.push(cellHtml(row[k], k));
      parts.push("</tr>");
      html.push(parts.join(""));
    }
    body.insertAdjacentHTML("beforeend", html.join(""));
    painted = end;
    var rest = matched.length - painted;
    more.hidden = rest <= 0;
    more.textContent = rest > 0 ? "show " + Math.min(rest, WINDOW) + " more of the " + rest + " rows left" : "";
    document.getElementById("count").textContent = "showing " + matched.length + " of " + rows.length + " rows" +
      (rest > 0 ? " (the first " + painted + " painted; scroll for more)" : "");
  }
  function paint() {
    shown = columns.map(function (_, c) { return visible(c); });
    var head = table.tHead.rows[0].cells;
    for (var c = 0; c < columns.length; c++) {
      head[c].style.display = shown[c] ? "" : "none";
      head[c].dataset.dir = c === state.column ? (state.dir > 0 ? "asc" : "desc") : "";
    }
    matched = order.filter(matches);
    painted = 0;
    body.textContent = "";
    paintMore();
  }
  more.addEventListener("click", paintMore);
  if (window.IntersectionObserver) {
    new IntersectionObserver(function (entries) {
      if (entries[0].isIntersecting && painted < matched.length) paintMore();
    }, { rootMargin: "400px" }).observe(more);
  }
  function sortBy(c) {
    state.dir = state.column === c ? -state.dir : 1;
    state.column = c;
    order = rows.map(function (_, i) { return i; });
    order.sort(compare);
    paint();
  }
  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th");
    if (th) sortBy(th.cellIndex);
  });
  function bind(id, name, transform) {
    var element = document.getElementById(id);
    if (!element) return;
    element.addEventListener("input", function () {
      state[name] = transform ? transform(element.value) : element.value;
      if (name === "figure" && state.column >= 0) { state.dir = -state.dir; sortBy(state.column); } else paint();
    });
  }
  bind("filter-outcome", "outcome");
  bind("filter-template", "template");
  bind("filter-text", "text", function (v) { return v.trim().toLowerCase(); });
  bind("sort-figure", "figure", function (v) { return parseInt(v, 10); });
  var panel = document.getElementById("story");
  body.addEventListener("click", function (event) {
    var td = event.target.closest("td.story");
    if (!td) return;
    panel.querySelector(".content").innerHTML = stories[parseInt(td.dataset.story, 10)];
    panel.hidden = false;
  });
  panel.querySelector("button").addEventListener("click", function () { panel.hidden = true; });
  document.addEventListener("keydown", function (event) { if (event.key === "Escape") panel.hidden = true; });
  paint();
})();
