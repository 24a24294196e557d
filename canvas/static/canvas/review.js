// The review page (templates/canvas/review.html): n / p move between files, the line numbers
// select lines to comment on (Shift extends within one file and side), and the pending comments
// live in this tab's sessionStorage until Send review posts them, as JSON, with the form. The
// server writes the message; comments are shown with textContent only.
(function () {
  "use strict";

  var root = document.getElementById("review");
  if (!root) {
    return;
  }
  var KEY = "canvas-review:" + root.dataset.conversation;
  var form = document.getElementById("review-form");
  var field = document.getElementById("review-comments");
  var comments = [];
  var selection = null;

  function files() {
    return Array.prototype.slice.call(root.querySelectorAll(".review-file"));
  }

  function fileOf(path) {
    return files().filter(function (el) { return el.dataset.path === path; })[0] || null;
  }

  function buttonFor(file, side, line) {
    return file && file.querySelector(".ln-button[data-side='" + side + "'][data-line='" + line + "']");
  }

  function cite(c) {
    var lines = c.start === c.end ? String(c.start) : c.start + "-" + c.end;
    return c.path + ":" + lines + (c.side === "old" ? " (before the change)" : "");
  }

  function save() {
    try {
      sessionStorage.setItem(KEY, JSON.stringify(comments));
    } catch (e) {
      // Storage full or disabled: the comments stay on this page until it is left.
    }
  }

  function load() {
    var raw = (field && field.value) || sessionStorage.getItem(KEY) || "[]";
    try {
      var found = JSON.parse(raw);
      comments = Array.isArray(found) ? found : [];
    } catch (e) {
      comments = [];
    }
    save();
  }

  function spanRow(template, row) {
    var fresh = template.content.firstElementChild.cloneNode(true);
    fresh.querySelector(".comment-cell").colSpan = row.children.length;
    row.parentNode.insertBefore(fresh, row.nextSibling);
    return fresh;
  }

  function fill(el, c, index) {
    el.querySelector(".comment-where").textContent = cite(c);
    el.querySelector(".comment-body").textContent = c.body;
    el.querySelector(".comment-remove").dataset.index = String(index);
    el.querySelector(".comment-remove").setAttribute("aria-label", "Remove the comment on " + cite(c));
  }

  function render() {
    root.querySelectorAll(".comment-row").forEach(function (el) { el.remove(); });
    var template = document.getElementById("comment-template");
    var unplaced = document.getElementById("review-unplaced");
    if (!template || !unplaced) {
      return;
    }
    unplaced.textContent = "";
    comments.forEach(function (c, index) {
      var button = buttonFor(fileOf(c.path), c.side, c.end);
      if (button) {
        fill(spanRow(template, button.closest("tr")), c, index);
      } else {
        // Its line is not in the diff any more (the agent changed the file): listed in the
        // form, so it can be removed before sending.
        var item = document.createElement("li");
        item.appendChild(template.content.querySelector(".review-comment").cloneNode(true));
        fill(item, c, index);
        unplaced.appendChild(item);
      }
    });
    unplaced.hidden = !unplaced.children.length;
    var count = document.getElementById("review-count");
    if (count) {
      count.textContent = comments.length ? comments.length + " comment" + (comments.length === 1 ? "" : "s") : "No comments yet";
    }
    var send = document.getElementById("review-send");
    if (send) {
      send.disabled = comments.length === 0;
    }
  }

  function closeForm() {
    root.querySelectorAll(".comment-form-row").forEach(function (el) { el.remove(); });
    root.querySelectorAll("tr.selected").forEach(function (el) { el.classList.remove("selected"); });
    selection = null;
  }

  function select(button, extend) {
    var file = button.closest(".review-file");
    var side = button.dataset.side;
    var line = Number(button.dataset.line);
    var anchor = extend && selection && selection.path === file.dataset.path && selection.side === side ? selection.anchor : line;
    closeForm();
    selection = { path: file.dataset.path, side: side, anchor: anchor, start: Math.min(anchor, line), end: Math.max(anchor, line) };
    file.querySelectorAll(".ln-button[data-side='" + side + "']").forEach(function (el) {
      var n = Number(el.dataset.line);
      if (n >= selection.start && n <= selection.end) {
        el.closest("tr").classList.add("selected");
      }
    });
    var row = spanRow(document.getElementById("comment-form-template"), buttonFor(file, side, selection.end).closest("tr"));
    var text = row.querySelector("textarea");
    text.id = "comment-text";
    var label = row.querySelector(".comment-label");
    label.htmlFor = text.id;
    label.textContent = "Comment on " + cite(selection);
    text.focus();
  }

  function add(formEl) {
    var body = formEl.querySelector("textarea").value.trim();
    if (!body || !selection) {
      return;
    }
    comments.push({ path: selection.path, side: selection.side, start: selection.start, end: selection.end, body: body });
    closeForm();
    save();
    render();
  }

  function step(delta) {
    var all = files();
    if (!all.length) {
      return;
    }
    var current = all.findIndex(function (el) { return el.contains(document.activeElement); });
    if (current < 0) {
      var top = all.filter(function (el) { return el.getBoundingClientRect().top <= 1; });
      current = top.length ? all.indexOf(top[top.length - 1]) : (delta > 0 ? -1 : 0);
    }
    var next = all[Math.max(0, Math.min(all.length - 1, current + delta))];
    var summary = next.querySelector("summary");
    summary.focus();
    next.scrollIntoView({ block: "start" });
  }

  root.addEventListener("click", function (evt) {
    var button = evt.target.closest("button");
    if (!button) {
      return;
    }
    if (button.classList.contains("ln-button")) {
      select(button, evt.shiftKey);
    } else if (button.classList.contains("comment-cancel")) {
      closeForm();
    } else if (button.classList.contains("comment-remove")) {
      comments.splice(Number(button.dataset.index), 1);
      save();
      render();
    } else if (button.id === "review-collapse" || button.id === "review-expand") {
      files().forEach(function (el) { el.open = button.id === "review-expand"; });
    }
  });

  root.addEventListener("submit", function (evt) {
    if (evt.target.classList.contains("comment-form")) {
      evt.preventDefault();
      add(evt.target);
    }
  });

  root.addEventListener("keydown", function (evt) {
    var text = evt.target.closest && evt.target.closest(".comment-form textarea");
    if (!text) {
      return;
    }
    if (evt.key === "Escape") {
      closeForm();
    } else if (evt.key === "Enter" && (evt.ctrlKey || evt.metaKey)) {
      evt.preventDefault();
      add(text.form);
    }
  });

  document.addEventListener("keydown", function (evt) {
    var target = evt.target;
    if (evt.ctrlKey || evt.metaKey || evt.altKey || target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) {
      return;
    }
    if (evt.key === "n" || evt.key === "p") {
      evt.preventDefault();
      step(evt.key === "n" ? 1 : -1);
    }
  });

  if (form) {
    form.addEventListener("submit", function () {
      field.value = JSON.stringify(comments);
      // A refusal renders the page again with these comments in the field: nothing is lost.
      sessionStorage.removeItem(KEY);
    });
  }

  load();
  render();
})();
