// The payload editor: live JSON validation and a live line diff against
// the current version. The page works without this script (the server
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
    showDiff(text);
  }

  var timer = 0;
  area.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 150);
  });
  check();
})();
