// The new-conversation form: parts that matter for one choice only are shown with it.
//
// An element marked data-show-when="FIELD=VALUE" is hidden unless the form's FIELD holds VALUE
// (the Docker image while "Runs in" is Docker, the model id box while "Another model" is
// picked). Without this script every part shows, and the server ignores the ones that do not
// apply. Run at load, on every change, and on a form htmx swapped in (one refused by the server).
(function () {
  "use strict";

  function sync(root) {
    Array.prototype.forEach.call(root.querySelectorAll("[data-show-when]"), function (el) {
      var form = el.closest("form");
      var rule = el.dataset.showWhen.split("=");
      var field = form && form.elements[rule[0]];
      el.hidden = !!field && field.value !== rule[1];
    });
  }

  document.addEventListener("change", function (evt) {
    var form = evt.target.form;
    if (form) {
      sync(form);
    }
  });
  document.addEventListener("htmx:load", function (evt) {
    sync(evt.detail.elt.querySelectorAll ? evt.detail.elt : document);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { sync(document); });
  } else {
    sync(document);
  }
})();
