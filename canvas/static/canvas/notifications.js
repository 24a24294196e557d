// Desktop notifications for the conversation page and the "Needs approval" page.
//
// A [data-notify-enable] button asks for permission (Notification.requestPermission) and then
// says what the browser allows. With permission, a notification is shown only while you are
// not looking at the page (the tab is hidden or the window is not focused): when the page's
// socket reports that the conversation now waits for approval, finished, failed or got stuck,
// or when the approvals page's poll shows a conversation that was not waiting before.
// Clicking a notification focuses the tab (and opens the conversation from the approvals page).
// One tag per conversation, so a newer notification replaces an older one.
(function () {
  "use strict";

  var WATCHED = {
    waiting_for_confirmation: "Needs approval",
    finished: "Finished",
    error: "Error",
    stuck: "Stuck",
  };

  function supported() {
    return "Notification" in window;
  }

  function showButtons() {
    var buttons = document.querySelectorAll("[data-notify-enable]");
    Array.prototype.forEach.call(buttons, function (button) {
      if (!supported()) {
        button.hidden = true;
        return;
      }
      var permission = Notification.permission;
      button.hidden = false;
      button.disabled = permission !== "default";
      button.dataset.permission = permission;
      button.textContent = {
        granted: "Notifications on",
        denied: "Notifications blocked",
      }[permission] || "Enable notifications";
    });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-notify-enable]");
    if (!button || !supported()) {
      return;
    }
    var asked = Notification.requestPermission(showButtons); // the callback for old Safari
    if (asked && asked.then) {
      asked.then(showButtons);
    }
  });

  function away() {
    return document.visibilityState !== "visible" || !document.hasFocus();
  }

  function notify(title, body, tag, url) {
    if (!supported() || Notification.permission !== "granted" || !away()) {
      return;
    }
    var note = new Notification(title, { body: body, tag: tag });
    note.onclick = function () {
      window.focus();
      if (url && window.location.pathname !== url) {
        window.location.assign(url);
      }
      note.close();
    };
  }

  // The conversation page: status changes in the fragments its socket delivers.
  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    var section = document.getElementById("conversation");
    if (!section || evt.detail.message.indexOf("data-status=") < 0) {
      return;
    }
    // A status changed: the nav's approvals badge asks again now, not at its next poll.
    htmx.trigger(document.body, "approvals-changed");
    var template = document.createElement("template");
    template.innerHTML = evt.detail.message;
    var lines = template.content.querySelectorAll("[data-status]");
    var line = lines[lines.length - 1];
    var label = line && WATCHED[line.dataset.status];
    if (label) {
      var reason = line.querySelector(".muted");
      notify(
        label + ": " + section.dataset.notifyTitle,
        reason ? reason.textContent.trim() : label,
        "conversation-" + window.location.pathname,
        window.location.pathname
      );
    }
  });

  // The approvals page: conversations that appear in a poll and were not there before.
  function waitingIds() {
    var rows = document.getElementById("approval-rows");
    return rows ? (rows.dataset.waiting || "").split(" ").filter(Boolean) : null;
  }

  var known = null;

  document.addEventListener("htmx:afterSettle", function () {
    var ids = waitingIds();
    if (ids === null) {
      return;
    }
    ids.forEach(function (id) {
      if (known && known.indexOf(id) < 0) {
        var item = document.querySelector('.waiting-conversation[data-conversation="' + id + '"]');
        if (item) {
          notify("Needs approval: " + item.dataset.title, item.dataset.summary,
                 "conversation-" + item.dataset.url, item.dataset.url);
        }
      }
    });
    known = ids;
  });

  document.addEventListener("DOMContentLoaded", function () {
    known = waitingIds();
    showButtons();
  });
})();
