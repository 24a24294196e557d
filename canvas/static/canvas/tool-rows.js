// Tool rows are compact: an output longer than a few lines is folded to its first lines
// (stream.css, .output-box.is-long) and its "Show more" button opens or folds it again.
// Without this script the button stays hidden and outputs are shown whole.
(function () {
  "use strict";

  document.documentElement.classList.add("tool-rows-fold");

  function reveal(root) {
    Array.prototype.forEach.call(root.querySelectorAll(".expand-output[hidden]"), function (b) {
      b.hidden = false;
    });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest(".expand-output");
    if (!button) {
      return;
    }
    var box = document.getElementById(button.getAttribute("aria-controls"));
    var open = box.classList.toggle("is-open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.textContent = open ? "Show less" : "Show more";
  });
  // Rows arrive over the socket and through htmx swaps as well as with the page.
  document.addEventListener("htmx:load", function (evt) {
    reveal(evt.detail.elt.querySelectorAll ? evt.detail.elt : document);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { reveal(document); });
  } else {
    reveal(document);
  }
})();
