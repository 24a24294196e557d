// The conversation page's live feed: only what htmx and its ws extension cannot do.
//
// On every (re)connect, tell the server the last event seq this page shows, so it sends
// exactly the later ones: no gap, no duplicate. Fragments whose event is already on the page
// are dropped (belt and braces), and a fragment that would leave a gap forces a reconnect,
// which resumes from the last seq shown. The view follows new events while you are at the bottom;
// scrolled up, it stays put and #jump-latest counts what arrived below ("3 new events, jump to
// latest"), until a click on it, or the reader's own scroll, brings them back to the tail.
//
// A lost connection shows a banner that stays in view, retried within seconds (or at once with
// "Retry now"): the extension's own backoff doubles up to a minute, and once left a page 53 s
// behind a restarted server.
//
// An external agent's live text arrives as bubbles in #live-stream, each deleted by the frame
// that brings its stored event. Deltas are never replayed, so a new socket starts with none:
// whatever a bubble showed is in the log by then, or will be. A tool's bubble belongs under its
// call's card, once that card is on the page.
(function () {
  "use strict";

  var NEAR_BOTTOM_PX = 160;
  var RECONNECTING_CODES = [1006, 1011, 1012, 1013]; // the ones the ws extension retries
  var RETRY_DELAYS_MS = [500, 1000, 2000, 3000]; // then every 3 s
  // Closes that say why (canvas/ws_close.py); the extension does not retry these.
  var REFUSED = { 4401: "signed out", 4403: "refused", 4404: "no access" };
  var followBottom = false;
  var arriving = []; // the seqs of the frame being swapped in
  var unseen = 0; // events that arrived below a reader who had scrolled up
  var latestSocket = null; // the socket the extension made last; older ones were replaced
  var socketWrapper = null;

  htmx.config.wsReconnectDelay = function (retryCount) {
    return RETRY_DELAYS_MS[Math.min(retryCount, RETRY_DELAYS_MS.length - 1)];
  };

  var makeSocket = htmx.createWebSocket; // set by the ws extension, which loads first
  htmx.createWebSocket = function (url) {
    latestSocket = makeSocket(url);
    return latestSocket;
  };

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

  function dropLiveBubbles() {
    document.querySelectorAll(".live-bubble").forEach(function (el) { el.remove(); });
  }

  function placeToolBubbles() {
    document.querySelectorAll("#live-stream > .live-bubble[data-call-key]").forEach(function (el) {
      var log = document.getElementById("call-log-" + el.dataset.callKey);
      if (log) {
        log.appendChild(el);
      }
    });
  }

  function nearBottom() {
    var doc = document.documentElement;
    return window.innerHeight + window.scrollY >= doc.scrollHeight - NEAR_BOTTOM_PX;
  }

  function jumpButton() {
    return document.getElementById("jump-latest");
  }

  function shownCount(seqs) {
    // Quiet rows are hidden; a result's marker is hidden too, but its result shows in its card.
    return seqs.filter(function (seq) {
      var row = document.getElementById("event-" + seq);
      return row && (!row.hidden || row.classList.contains("event-result-marker"));
    }).length;
  }

  function countUnseen(count) {
    var button = jumpButton();
    if (!button || !count) {
      return;
    }
    unseen += count;
    button.textContent = unseen + (unseen === 1 ? " new event" : " new events") + ", jump to latest";
    button.hidden = false;
  }

  function clearUnseen() {
    unseen = 0;
    var button = jumpButton();
    if (button) {
      button.hidden = true;
    }
  }

  function toLatest() {
    window.scrollTo(0, document.documentElement.scrollHeight);
    clearUnseen();
  }

  document.addEventListener("click", function (evt) {
    if (evt.target.closest && evt.target.closest("#jump-latest")) {
      toLatest();
    }
  });

  window.addEventListener("scroll", function () {
    if (unseen && nearBottom()) {
      clearUnseen(); // the reader came back down on their own
    }
  }, { passive: true });

  function setLive(text, state) {
    var indicator = document.getElementById("live-indicator");
    if (indicator) {
      indicator.textContent = text;
      indicator.dataset.state = state;
    }
  }

  function banner() {
    var el = document.getElementById("reconnect-banner");
    if (!el) {
      el = document.createElement("div");
      el.id = "reconnect-banner";
      el.className = "reconnect-banner";
      el.setAttribute("role", "status");
      el.hidden = true;
      var text = document.createElement("span");
      text.className = "reconnect-text";
      var button = document.createElement("button");
      button.type = "button";
      button.className = "reconnect-now";
      button.textContent = "Retry now";
      button.addEventListener("click", retryNow);
      el.append(text, button);
      document.body.appendChild(el);
    }
    return el;
  }

  function showBanner(text) {
    var el = banner();
    el.querySelector(".reconnect-text").textContent = text;
    el.querySelector(".reconnect-now").disabled = false;
    el.hidden = false;
  }

  function retryNow() {
    // Only when no attempt is under way; the extension's pending retry still runs, finds
    // this socket open and replaces it, which resumes from the same seq.
    if (socketWrapper && latestSocket && latestSocket.readyState === WebSocket.CLOSED) {
      banner().querySelector(".reconnect-now").disabled = true;
      socketWrapper.reconnect();
    }
  }

  document.addEventListener("htmx:wsOpen", function (evt) {
    var socket = evt.detail.event.target;
    if (socket !== latestSocket) {
      socket.close(); // an attempt overtaken by a newer one
      return;
    }
    socketWrapper = evt.detail.socketWrapper;
    setLive("live", "open");
    banner().hidden = true;
    dropLiveBubbles(); // this socket never drew them, so it would never delete them
    socketWrapper.send(JSON.stringify({ resume: lastSeq() }));
  });

  document.addEventListener("htmx:wsClose", function (evt) {
    var closed = evt.detail.event;
    if (closed.target !== latestSocket) {
      return; // a socket we already replaced
    }
    socketWrapper = evt.detail.socketWrapper;
    var retrying = RECONNECTING_CODES.indexOf(closed.code) >= 0;
    setLive(retrying ? "reconnecting…" : REFUSED[closed.code] || "offline", "closed");
    if (REFUSED[closed.code]) {
      banner().hidden = true; // retrying cannot help; the indicator says why
    } else {
      showBanner(retrying ? "Connection lost. Reconnecting…" : "Live updates stopped.");
    }
  });

  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var seqs = seqsIn(evt.detail.message);
    arriving = [];
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
    arriving = seqs;
    followBottom = nearBottom();
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    placeToolBubbles(); // a bubble may come before its call's card: tried after every frame
    if (followBottom) {
      toLatest();
    } else {
      countUnseen(shownCount(arriving));
    }
    arriving = [];
  });
})();
