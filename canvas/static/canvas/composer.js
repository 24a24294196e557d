// Composers: forms marked data-composer="NOUN" (the new-conversation prompt, the message box).
//
// Ctrl+Enter (Cmd+Enter on a Mac) sends from anywhere in the form. requestSubmit, not
// submit: the browser's own checks and htmx's submit handler both run as for a click.
//
// Their text boxes carry the server's limits (required, maxlength = MAX_PROMPT_CHARS). What
// those attributes miss is checked here and refused with a message under the box, before
// anything is sent: text that is only spaces, text set longer than maxlength (the browser
// enforces it on typing only), and a paste that would not fit (the browser would cut it
// silently, and a truncated prompt would be sent as if whole).
(function () {
  "use strict";

  function count(n) {
    return n.toLocaleString("en");
  }

  function nounOf(field) {
    return field.form.dataset.composer || "text";
  }

  function problem(field) {
    var noun = nounOf(field);
    if (!field.value.trim()) {
      return "Write a " + noun + " first.";
    }
    if (field.maxLength > 0 && field.value.length > field.maxLength) {
      return "The " + noun + " is " + count(field.value.length) + " characters long; the limit is " +
        count(field.maxLength) + ". Shorten it before sending.";
    }
    return "";
  }

  function composerField(el) {
    return el && el.tagName === "TEXTAREA" && el.form && el.form.hasAttribute("data-composer");
  }

  function note(field) {
    var next = field.nextElementSibling;
    if (next && next.classList.contains("composer-problem")) {
      return next;
    }
    var el = document.createElement("p");
    el.className = "field-error composer-problem";
    el.setAttribute("role", "alert");
    el.hidden = true;
    field.after(el);
    return el;
  }

  function show(field, text) {
    var el = note(field);
    el.textContent = text;
    el.hidden = !text;
    if (text) {
      field.setAttribute("aria-invalid", "true");
    } else {
      field.removeAttribute("aria-invalid");
    }
  }

  // Keeps the browser's verdict in step, so requestSubmit and a click refuse as well.
  function sync(field) {
    var text = field.value ? problem(field) : ""; // empty: `required` says so
    field.setCustomValidity(text);
    return text;
  }

  document.addEventListener("input", function (evt) {
    var field = evt.target;
    if (composerField(field)) {
      sync(field);
      show(field, ""); // what was wrong is being fixed; a send will check again
    }
  });

  document.addEventListener("invalid", function (evt) {
    if (composerField(evt.target)) {
      show(evt.target, problem(evt.target));
    }
  }, true); // `invalid` does not bubble

  // Belt and braces for a value the page set without an input event: checked again on the
  // way out, ahead of htmx's own submit listener on the form.
  document.addEventListener("submit", function (evt) {
    if (!evt.target.hasAttribute("data-composer")) {
      return;
    }
    Array.prototype.forEach.call(evt.target.querySelectorAll("textarea"), function (field) {
      var text = sync(field) || problem(field);
      if (text && !evt.defaultPrevented) {
        evt.preventDefault();
        evt.stopPropagation();
        show(field, text);
        field.focus();
      }
    });
  }, true);

  document.addEventListener("paste", function (evt) {
    var field = evt.target;
    if (!composerField(field) || !(field.maxLength > 0) || !evt.clipboardData) {
      return;
    }
    var pasted = evt.clipboardData.getData("text/plain").replace(/\r\n/g, "\n");
    var kept = field.value.length - (field.selectionEnd - field.selectionStart);
    if (kept + pasted.length > field.maxLength) {
      evt.preventDefault();
      show(field, "Not pasted: the " + nounOf(field) + " would be " + count(kept + pasted.length) +
        " characters long; the limit is " + count(field.maxLength) + ".");
    }
  });

  // The server's word on a body over the upload limit (canvas.request_limits) is added to the
  // form, which keeps the text; it goes when the form is sent again.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var form = evt.detail.elt;
    if (form.hasAttribute && form.hasAttribute("data-composer")) {
      Array.prototype.forEach.call(form.querySelectorAll(".request-too-large"), function (el) {
        el.remove();
      });
    }
  });

  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Enter" || !(evt.ctrlKey || evt.metaKey) || !evt.target.closest) {
      return;
    }
    var form = evt.target.closest("form[data-composer]");
    if (!form) {
      return;
    }
    evt.preventDefault();
    var button = form.querySelector("button[type=submit]");
    // htmx disables the button while the form's request is in flight: no second send.
    if (button && !button.disabled) {
      form.requestSubmit(button);
    }
  });
})();
