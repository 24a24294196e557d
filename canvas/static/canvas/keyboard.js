// Keyboard shortcuts, on every page ("?" lists them): j / k move between the events of a
// conversation and the actions waiting for approval (on its page, in the inbox, on Runs); a / r
// approve or reject the action in focus (r sends the reason typed beside it, if any); g then i
// goes to the "Needs approval" inbox. Keys typed into a field, or with Ctrl, Alt or Meta, are
// left alone, so typing and the browser's own shortcuts never trigger these; Escape leaves the
// field (the composer takes the focus when a conversation opens).
(function () {
  "use strict";

  var ITEMS = "#events > .event:not([hidden]), .approval-card:not(.is-decided), .pending-item";
  var DECIDABLE = ".approval-card, .pending-item";
  var CHORD_MS = 1500; // how long "g" waits for its second key
  var SHORTCUTS = [
    [["j"], "Next event or action waiting for approval"],
    [["k"], "Previous event or action"],
    [["a"], "Approve the action in focus"],
    [["r"], "Reject the action in focus (with the reason typed beside it, if any)"],
    [["g", "i"], "Go to Needs approval"],
    [["?"], "Show this list"],
    [["Esc"], "Leave a text field, so these keys work"],
  ];
  var gPressedAt = 0;

  function typing(target) {
    return target.closest && target.closest("input, textarea, select, [contenteditable]");
  }

  function items() {
    return Array.prototype.filter.call(document.querySelectorAll(ITEMS), function (el) {
      return el.getClientRects().length > 0; // shown (a collapsed panel's items are not)
    });
  }

  function indexOfFocus(list) {
    var active = document.activeElement;
    for (var i = 0; i < list.length; i++) {
      if (list[i] === active || list[i].contains(active)) {
        return i;
      }
    }
    return -1;
  }

  function firstInView(list, step) {
    // Nothing in focus yet: start from what the reader sees, not from the top of the log.
    var height = window.innerHeight;
    if (step > 0) {
      for (var i = 0; i < list.length; i++) {
        if (list[i].getBoundingClientRect().top >= 0) {
          return i;
        }
      }
      return list.length - 1;
    }
    for (var j = list.length - 1; j >= 0; j--) {
      if (list[j].getBoundingClientRect().bottom <= height) {
        return j;
      }
    }
    return 0;
  }

  function move(step) {
    var list = items();
    if (!list.length) {
      return;
    }
    var at = indexOfFocus(list);
    var next = at < 0 ? firstInView(list, step) : Math.min(Math.max(at + step, 0), list.length - 1);
    var el = list[next];
    if (!el.hasAttribute("tabindex")) {
      el.setAttribute("tabindex", "-1"); // focusable by script, not a Tab stop of its own
    }
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "nearest" });
  }

  function decide(approve) {
    var active = document.activeElement;
    var item = active && active.closest && active.closest(DECIDABLE);
    if (!item) {
      return;
    }
    var button = item.querySelector(approve ? "button.approve" : "button.reject");
    if (button && !button.disabled) {
      button.click();
    }
  }

  function dialog() {
    var el = document.getElementById("shortcuts-dialog");
    if (el) {
      return el;
    }
    el = document.createElement("dialog");
    el.id = "shortcuts-dialog";
    el.className = "shortcuts-dialog";
    el.setAttribute("aria-labelledby", "shortcuts-title");
    var title = document.createElement("h2");
    title.id = "shortcuts-title";
    title.textContent = "Keyboard shortcuts";
    var list = document.createElement("dl");
    SHORTCUTS.forEach(function (shortcut) {
      var keys = document.createElement("dt");
      shortcut[0].forEach(function (key, index) {
        if (index) {
          keys.append(" then ");
        }
        var kbd = document.createElement("kbd");
        kbd.textContent = key;
        keys.append(kbd);
      });
      var what = document.createElement("dd");
      what.textContent = shortcut[1];
      list.append(keys, what);
    });
    var close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.addEventListener("click", function () { el.close(); });
    el.append(title, list, close);
    document.body.appendChild(el);
    return el;
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.ctrlKey || evt.altKey || evt.metaKey) {
      return;
    }
    if (typing(evt.target)) {
      if (evt.key === "Escape" && !evt.target.closest("dialog")) {
        evt.target.blur(); // out of the field (the composer has focus on load): keys are shortcuts again
      }
      return;
    }
    var shortcuts = document.getElementById("shortcuts-dialog");
    if (shortcuts && shortcuts.open) {
      return; // Esc closes it (the browser's own)
    }
    var chord = Date.now() - gPressedAt < CHORD_MS;
    gPressedAt = 0;
    if (chord && evt.key === "i") {
      var inbox = document.querySelector("a.approvals-link");
      if (inbox) {
        window.location.assign(inbox.href);
      }
    } else if (evt.key === "g") {
      gPressedAt = Date.now();
    } else if (evt.key === "j" || evt.key === "k") {
      move(evt.key === "j" ? 1 : -1);
    } else if (evt.key === "a" || evt.key === "r") {
      decide(evt.key === "a");
    } else if (evt.key === "?") {
      dialog().showModal();
    } else {
      return;
    }
    evt.preventDefault();
  });
})();
