// The conversation page's live feed: only what htmx and its ws extension cannot do.
//
// On every (re)connect, tell the server the last event seq this page shows, so it sends
// exactly the later ones: no gap, no duplicate. Fragments whose event is already on the page
// are dropped (belt and braces), and a fragment that would leave a gap forces a reconnect,
// which resumes from the last seq shown. The view follows new events while you are at the bottom.
(function () {
  "use strict";

  var NEAR_BOTTOM_PX = 160;
  var RECONNECTING_CODES = [1006, 1011, 1012, 1013]; // the ones the ws extension retries
  // Closes that say why (canvas/ws_close.py); the extension does not retry these.
  var REFUSED = { 4401: "signed out", 4403: "refused", 4404: "no access" };
  var followBottom = false;
  var currentSocket = null;

  function lastSeq() {
    var rows = document.querySelectorAll("#events > [data-seq]");
    return rows.length ? parseInt(rows[rows.length - 1].dataset.seq, 10) : 0;
  }

  function seqsIn(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return Array.prototype.map.call(template.content.querySelectorAll("[data-seq]"), function (el) {
      return parseInt(el.dataset.seq, 10);
    });
  }

  function nearBottom() {
    var doc = document.documentElement;
    return window.innerHeight + window.scrollY >= doc.scrollHeight - NEAR_BOTTOM_PX;
  }

  function setLive(text, state) {
    var indicator = document.getElementById("live-indicator");
    if (indicator) {
      indicator.textContent = text;
      indicator.dataset.state = state;
    }
  }

  document.addEventListener("htmx:wsOpen", function (evt) {
    currentSocket = evt.detail.event.target;
    setLive("live", "open");
    evt.detail.socketWrapper.send(JSON.stringify({ resume: lastSeq() }));
  });

  document.addEventListener("htmx:wsClose", function (evt) {
    var closed = evt.detail.event;
    if (currentSocket && closed.target !== currentSocket) {
      return; // a socket we already replaced
    }
    var retrying = RECONNECTING_CODES.indexOf(closed.code) >= 0;
    setLive(retrying ? "reconnecting…" : REFUSED[closed.code] || "offline", "closed");
  });

  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var seqs = seqsIn(evt.detail.message);
    if (seqs.length) {
      var last = lastSeq();
      if (seqs.some(function (seq) { return document.getElementById("event-" + seq); })) {
        evt.preventDefault(); // already shown
        return;
      }
      if (seqs[0] !== last + 1) {
        evt.preventDefault(); // a gap: start over from what the page shows
        evt.detail.socketWrapper.reconnect();
        return;
      }
    }
    followBottom = nearBottom();
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    if (followBottom) {
      window.scrollTo(0, document.documentElement.scrollHeight);
    }
  });

  // Ctrl+Enter (or Cmd+Enter) sends the follow-up message.
  document.addEventListener("keydown", function (evt) {
    if (evt.key === "Enter" && (evt.ctrlKey || evt.metaKey) && evt.target.closest) {
      var form = evt.target.closest("#message-form");
      if (form && !form.querySelector("fieldset").disabled) {
        evt.preventDefault();
        form.requestSubmit();
      }
    }
  });
})();
