// The Runs page (canvas.runs_consumer sends its rows): says whether the table is live, and has
// the nav's approvals badge ask again as soon as the rows waiting for approval change.
(function () {
  "use strict";

  var REFUSED = { 4401: "signed out", 4403: "refused", 4404: "no access" };
  var waiting = null;

  function setLive(text, state) {
    var indicator = document.getElementById("runs-live");
    if (indicator) {
      indicator.textContent = text;
      indicator.dataset.state = state;
    }
  }

  function waitingKeys() {
    var rows = document.querySelectorAll("#runs-body tr.run-row[data-status=waiting_for_confirmation]");
    return Array.prototype.map.call(rows, function (row) { return row.id; }).join(" ");
  }

  document.addEventListener("htmx:wsOpen", function () {
    setLive("live", "open");
  });

  document.addEventListener("htmx:wsClose", function (evt) {
    setLive(REFUSED[evt.detail.event.code] || "reconnecting…", "closed");
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    var now = waitingKeys();
    if (waiting !== null && now !== waiting) {
      htmx.trigger(document.body, "approvals-changed");
    }
    waiting = now;
  });
})();
