// Composers: forms marked data-composer (the new-conversation prompt, the message box).
//
// Ctrl+Enter (Cmd+Enter on a Mac) sends from anywhere in the form. requestSubmit, not
// submit: the browser's own checks and htmx's submit handler both run as for a click.
(function () {
  "use strict";

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
