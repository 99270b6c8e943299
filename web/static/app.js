// quarantine UI: progressive enhancements only; every page works without
// this script. Loaded from our own origin (the CSP allows no other).
//
// Keyboard, on every page:
//   /          focus the search box (the page's search field, else the
//              first field of its filter form)
//   j, k       next, previous row of the list ([data-row] elements, else
//              the rows of the page's tables that hold a link); the arrow
//              keys do the same once a row has the focus
//   Enter      open the row (its first link has the focus)
//   Escape     leave the search box
//
// Copy buttons (button.copy[data-copy], hidden without this script) copy
// the whole identifier that a table shows shortened.
"use strict";
(function () {
  function typing(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  function searchBox() {
    return document.querySelector('main input[type="search"]') ||
      document.querySelector('main form[role="search"] input:not([type="hidden"]), main form[role="search"] select');
  }

  function rows() {
    var marked = document.querySelectorAll("main [data-row]");
    if (marked.length) return Array.prototype.slice.call(marked);
    return Array.prototype.slice.call(document.querySelectorAll("main table tbody tr")).filter(function (tr) {
      return tr.querySelector("a[href]");
    });
  }

  function rowOf(el, list) {
    for (var i = 0; i < list.length; i++) {
      if (list[i] === el || list[i].contains(el)) return i;
    }
    return -1;
  }

  var current = -1;

  function select(list, i) {
    if (!list.length) return;
    i = Math.max(0, Math.min(list.length - 1, i));
    list.forEach(function (r) { r.classList.remove("current"); });
    var row = list[i];
    current = i;
    row.classList.add("current");
    var target = row.querySelector("a[href]") || row.querySelector("button, input:not([type=hidden]), select");
    if (!target) {
      if (!row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
      target = row;
    }
    target.focus();
    if (row.scrollIntoView) row.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    var active = document.activeElement;
    if (e.key === "Escape" && typing(active) && active === searchBox()) {
      active.blur();
      return;
    }
    if (typing(active)) return;
    if (e.key === "/") {
      var box = searchBox();
      if (box) {
        e.preventDefault();
        box.focus();
        if (box.select) box.select();
      }
      return;
    }
    var list, at;
    switch (e.key) {
      case "j":
      case "k":
        list = rows();
        at = rowOf(active, list);
        if (at < 0) at = current < list.length ? current : -1;
        if (e.key === "j") select(list, at + 1);
        else select(list, at < 0 ? 0 : at - 1);
        return;
      case "ArrowDown":
      case "ArrowUp":
        list = rows();
        at = rowOf(active, list);
        if (at < 0) return; // the arrows scroll the page until a row has the focus
        e.preventDefault();
        select(list, e.key === "ArrowDown" ? at + 1 : at - 1);
        return;
    }
  });

  // A row clicked or tabbed into becomes the current one.
  document.addEventListener("focusin", function (e) {
    var list = rows();
    var at = rowOf(e.target, list);
    if (at >= 0 && at !== current) {
      list.forEach(function (r) { r.classList.remove("current"); });
      list[at].classList.add("current");
      current = at;
    }
  });

  // Copy buttons: shown only when the script runs (the id stays in the
  // title without it).
  function copied(btn) {
    btn.classList.add("copied");
    btn.textContent = "copied";
    setTimeout(function () { btn.classList.remove("copied"); btn.textContent = "copy"; }, 1500);
  }
  function copy(btn) {
    var text = btn.getAttribute("data-copy");
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { copied(btn); }, function () { fallback(btn, text); });
    } else {
      fallback(btn, text);
    }
  }
  function fallback(btn, text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "visually-hidden";
    document.body.appendChild(ta);
    ta.select();
    try { if (document.execCommand("copy")) copied(btn); } catch (e) { /* the title still shows it */ }
    document.body.removeChild(ta);
  }
  function revealCopies(root) {
    root.querySelectorAll("button.copy[data-copy]").forEach(function (b) { b.hidden = false; });
  }
  revealCopies(document);
  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("button.copy[data-copy]");
    if (btn) {
      e.preventDefault();
      copy(btn);
    }
  });
  window.quarantineRevealCopies = revealCopies;
})();
