// The payload editor: live JSON validation and a live diff against the
// current version: by JSON Pointer when both are JSON (added, removed and
// changed values; formatting and member order are not changes), else by
// line. The page works without this script (the server
// checks the edit and shows the diff when the form is posted); it only
// adds feedback while typing. Text goes into the page as text nodes only.
"use strict";
(function () {
  var area = document.getElementById("payload");
  var current = document.getElementById("current");
  var status = document.getElementById("payload-status");
  var live = document.getElementById("diff-live");
  if (!area || !current || !status || !live) {
    return;
  }
  var isJSON = area.getAttribute("data-json") === "true";
  var MAX_CELLS = 4000000; // lines x lines of the part that differs

  function lines(s) {
    if (s.endsWith("\n")) {
      s = s.slice(0, -1);
    }
    return s === "" ? [] : s.split("\n");
  }

  // diff returns [op, text] pairs, op one of " ", "-", "+", or null when
  // the texts are too large to compare while typing.
  function diff(a, b) {
    var start = 0;
    while (start < a.length && start < b.length && a[start] === b[start]) {
      start++;
    }
    var endA = a.length, endB = b.length;
    while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
      endA--;
      endB--;
    }
    var n = endA - start, m = endB - start;
    if (n * m > MAX_CELLS) {
      return null;
    }
    // lcs[i][j]: the longest common subsequence of a[start+i..] and b[start+j..].
    var lcs = [];
    for (var i = 0; i <= n; i++) {
      lcs.push(new Int32Array(m + 1));
    }
    for (i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        lcs[i][j] = a[start + i] === b[start + j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    var out = [];
    for (i = 0; i < start; i++) {
      out.push([" ", a[i]]);
    }
    i = 0;
    j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[start + i] === b[start + j]) {
        out.push([" ", a[start + i]]);
        i++;
        j++;
      } else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        out.push(["-", a[start + i]]);
        i++;
      } else {
        out.push(["+", b[start + j]]);
        j++;
      }
    }
    for (i = endA; i < a.length; i++) {
      out.push([" ", a[i]]);
    }
    return out;
  }

  function showDiff(text) {
    var d = diff(lines(current.textContent), lines(text));
    var old = document.getElementById("diff");
    var none = document.getElementById("diff-none");
    var list = document.createElement("ol");
    list.id = "diff";
    list.className = "diff";
    list.setAttribute("aria-label", "Line diff");
    if (d === null) {
      live.textContent = "The payload is too large for a live diff: check the edit to see it.";
      return;
    }
    var changes = 0;
    d.forEach(function (p) {
      var li = document.createElement("li");
      li.className = p[0] === "+" ? "diff-add" : p[0] === "-" ? "diff-del" : "diff-same";
      var mark = document.createElement("span");
      mark.className = "diff-mark";
      mark.setAttribute("aria-hidden", "true");
      mark.textContent = p[0];
      var t = document.createElement("span");
      t.className = "diff-text";
      t.textContent = p[1];
      li.appendChild(mark);
      li.appendChild(t);
      list.appendChild(li);
      if (p[0] !== " ") {
        changes++;
      }
    });
    if (none) {
      none.remove();
    }
    if (changes === 0) {
      live.textContent = "No change from the current version.";
      if (old) {
        old.remove();
      }
      return;
    }
    live.textContent = changes + " changed line(s).";
    if (old) {
      old.replaceWith(list);
    } else {
      live.after(list);
    }
  }

  // jsonChanges compares two parsed JSON values as web/jsondiff.go does
  // (members by name, elements by index); numbers compare by value here,
  // by their text on the server.
  function token(t) {
    return "/" + String(t).replace(/~/g, "~0").replace(/\//g, "~1");
  }
  function kind(v) {
    return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  }
  function show(v) {
    var s = JSON.stringify(v);
    return s.length > 300 ? s.slice(0, 300) + "…" : s;
  }
  function jsonChanges(at, a, b, out) {
    if (out.length > 500) {
      return out;
    }
    var ka = kind(a), kb = kind(b);
    if (ka === "object" && kb === "object") {
      var names = Object.keys(a).sort();
      Object.keys(b).sort().forEach(function (k) {
        if (!Object.prototype.hasOwnProperty.call(a, k)) names.push(k);
      });
      names.forEach(function (k) {
        var inA = Object.prototype.hasOwnProperty.call(a, k), inB = Object.prototype.hasOwnProperty.call(b, k);
        var p = at + token(k);
        if (!inB) out.push(["remove", p, show(a[k]), ""]);
        else if (!inA) out.push(["add", p, "", show(b[k])]);
        else jsonChanges(p, a[k], b[k], out);
      });
      return out;
    }
    if (ka === "array" && kb === "array") {
      for (var i = 0; i < Math.max(a.length, b.length); i++) {
        var p = at + token(i);
        if (i >= b.length) out.push(["remove", p, show(a[i]), ""]);
        else if (i >= a.length) out.push(["add", p, "", show(b[i])]);
        else jsonChanges(p, a[i], b[i], out);
      }
      return out;
    }
    if (ka !== kb || ka === "object" || ka === "array" || a !== b) {
      out.push(["change", at === "" ? "(the whole payload)" : at, show(a), show(b)]);
    }
    return out;
  }

  function showStructural(text) {
    var a, b;
    try {
      a = JSON.parse(current.textContent);
      b = JSON.parse(text);
    } catch (e) {
      return false;
    }
    var changes = jsonChanges("", a, b, []);
    ["changes-box", "diff", "diff-none"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.remove();
    });
    var details = document.querySelector("details.linediff");
    if (details) details.remove();
    var oldHint = document.getElementById("changes-cut");
    if (oldHint) oldHint.remove();
    if (changes.length === 0) {
      live.textContent = "No change in any value from the current version (formatting and the order of members are not changes).";
      return true;
    }
    live.textContent = changes.length + " change(s) by JSON Pointer.";
    var box = document.createElement("div");
    box.className = "scroll";
    box.id = "changes-box";
    var table = document.createElement("table");
    table.className = "changes";
    table.id = "changes";
    var head = table.createTHead().insertRow();
    ["Where", "Change", "Was", "Becomes"].forEach(function (h) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = h;
      head.appendChild(th);
    });
    var body = table.createTBody();
    changes.slice(0, 500).forEach(function (c) {
      var tr = body.insertRow();
      tr.className = "change-" + c[0];
      var where = document.createElement("code");
      where.className = "pointer";
      where.textContent = c[1];
      tr.insertCell().appendChild(where);
      var op = tr.insertCell();
      op.className = "op";
      op.textContent = c[0] === "add" ? "added" : c[0] === "remove" ? "removed" : "changed";
      [c[2], c[3]].forEach(function (v, i) {
        var td = tr.insertCell();
        if ((i === 0 && c[0] !== "add") || (i === 1 && c[0] !== "remove")) {
          var code = document.createElement("code");
          code.className = "value";
          code.textContent = v;
          td.appendChild(code);
        }
      });
    });
    box.appendChild(table);
    live.after(box);
    return true;
  }

  function check() {
    var text = area.value;
    if (isJSON) {
      try {
        JSON.parse(text);
        status.textContent = "Valid JSON.";
        status.className = "hint ok";
        area.removeAttribute("aria-invalid");
      } catch (e) {
        status.textContent = "Not valid JSON: " + e.message;
        status.className = "hint field-error";
        area.setAttribute("aria-invalid", "true");
      }
    }
    if (!isJSON || !showStructural(text)) {
      showDiff(text);
    }
  }

  var timer = 0;
  area.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 150);
  });
  check();
})();
