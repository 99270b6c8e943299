// A replay's live progress: polls the page's progress URL (JSON) and
// updates the counts, the progress bar, the achieved rate and the ETA in
// place (and, while the batch is pinning, how many messages are pinned
// and the pin's ETA); when the count of items done changes it fetches the
// page again and replaces the per-message table's rows; when the state
// changes it reloads the page (its actions and items follow the state).
// The page works without this script.
"use strict";
(function () {
  var root = document.getElementById("replay");
  if (!root) {
    return;
  }
  var url = root.getAttribute("data-progress");
  var shown = root.getAttribute("data-state");
  var live = document.getElementById("replay-live");
  // Drafts and finished replays do not move by themselves but to expire.
  if (!url || ["completed", "failed", "cancelled", "expired", "draft"].indexOf(shown) >= 0) {
    return;
  }
  var INTERVAL = 1000;
  var doneEl = document.getElementById("replay-done");
  var lastDone = doneEl ? parseInt(doneEl.textContent, 10) : null;

  // The rows of the per-message table, read from the page itself (the
  // same page of items, the same escaping): no markup is built here.
  function refreshItems() {
    var body = document.querySelector("#replay-items tbody");
    if (!body) {
      return;
    }
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("HTTP " + res.status);
        }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("#replay-items tbody");
        if (fresh) {
          body.replaceWith(document.importNode(fresh, true));
          if (window.quarantineRevealCopies) {
            window.quarantineRevealCopies(document.getElementById("replay-items"));
          }
        }
      })
      .catch(function () { /* the counts still update; a reload shows the rows */ });
  }

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el) {
      el.textContent = text;
    }
  }

  function seconds(v) {
    var s = Math.round(v);
    if (s < 60) {
      return s + " s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + " min " + (s % 60) + " s";
    }
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  function update(p) {
    if (p.state !== shown) {
      location.reload();
      return false;
    }
    if (lastDone !== null && p.done !== lastDone) {
      refreshItems();
    }
    lastDone = p.done;
    setText("replay-done", String(p.done));
    setText("replay-total", String(p.total));
    var bar = document.getElementById("replay-progress");
    if (bar) {
      bar.max = p.total;
      bar.value = p.done;
      bar.textContent = p.done + " / " + p.total;
    }
    var pin = document.getElementById("pin-progress");
    if (pin) {
      pin.max = p.pin_total;
      pin.value = p.total;
      pin.textContent = p.total + " / " + p.pin_total;
      setText("pin-done", String(p.total));
      setText("pin-total", String(p.pin_total));
      setText("pin-eta", p.pin_eta_seconds === null ? "none" : seconds(p.pin_eta_seconds));
    }
    setText("replay-rate", p.achieved_rate === null ? "not started" : p.achieved_rate.toFixed(1) + " msg/s");
    setText("replay-eta", p.eta_seconds === null ? "none" : seconds(p.eta_seconds));
    if (p.canary_verdict) {
      setText("replay-canary", p.canary_verdict);
      var canary = document.getElementById("replay-canary");
      if (canary) {
        canary.className = "badge badge-canary-" + p.canary_verdict;
      }
    }
    Object.keys(p.counts).forEach(function (k) {
      var cell = document.querySelector('[data-count="' + CSS.escape(k) + '"]');
      if (cell) {
        cell.textContent = String(p.counts[k]);
      }
    });
    if (live) {
      live.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
    }
    return true;
  }

  function poll() {
    if (document.hidden) {
      setTimeout(poll, INTERVAL);
      return;
    }
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("HTTP " + res.status);
        }
        return res.json();
      })
      .then(function (p) {
        if (update(p)) {
          setTimeout(poll, INTERVAL);
        }
      })
      .catch(function () {
        if (live) {
          live.textContent = "Live progress stopped: reload the page.";
        }
      });
  }
  setTimeout(poll, INTERVAL);
})();
