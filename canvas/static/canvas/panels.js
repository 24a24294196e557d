// The side panel (templates/canvas/panels.html): switch tabs, and load the shown tab again
// after a step that may have touched files, so Changes, Files and Terminal follow the run.
//
// A tool's result (or a status change) arriving over the page's socket schedules one reload,
// a moment later so a burst of results costs one request. The reload keeps the diffs you had
// open open, and the panel's scroll position.
(function () {
  "use strict";

  var RELOAD_DELAY_MS = 400;
  var TOUCHING = /event-tool-result|data-status=/;
  var timer = null;

  function body() {
    return document.getElementById("panel-body");
  }

  function load(url) {
    var target = body();
    if (!target || !window.htmx) {
      return;
    }
    var open = Array.prototype.map.call(
      target.querySelectorAll("details[open][data-path]"),
      function (el) { return el.dataset.path; }
    );
    var scroll = target.scrollTop;
    target.dataset.panelUrl = url;
    htmx.ajax("GET", url, { target: target, swap: "innerHTML" }).then(function () {
      target.querySelectorAll("details[data-path]").forEach(function (el) {
        if (open.indexOf(el.dataset.path) >= 0) {
          el.open = true; // its toggle loads the diff again
        }
      });
      target.scrollTop = scroll;
    }, function () {
      // No answer (the server restarting): htmx rejects with nothing; the next reload retries.
    });
  }

  document.addEventListener("click", function (evt) {
    var tab = evt.target.closest && evt.target.closest(".panel-tab[data-panel-url]");
    if (!tab) {
      return;
    }
    document.querySelectorAll(".panel-tab").forEach(function (el) {
      el.setAttribute("aria-selected", el === tab ? "true" : "false");
    });
    body().setAttribute("aria-labelledby", tab.id);
    load(tab.dataset.panelUrl);
  });

  // Links inside a tab (folders, files) load into the panel: remember where it is.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var target = body();
    if (target && evt.detail.target === target && evt.detail.successful && evt.detail.pathInfo) {
      target.dataset.panelUrl = evt.detail.pathInfo.requestPath;
    }
  });

  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    if (!TOUCHING.test(evt.detail.message || "")) {
      return;
    }
    clearTimeout(timer);
    timer = setTimeout(function () {
      var target = body();
      if (target && target.dataset.panelUrl) {
        load(target.dataset.panelUrl);
      }
    }, RELOAD_DELAY_MS);
  });
})();
