// Copy buttons: <button data-copy-from="ID"> copies the value of the field with that id.
//
// A script file, not an inline handler: the Content-Security-Policy allows no inline code.
// The Clipboard API where the page is a secure context; selecting and copying elsewhere.
(function () {
  "use strict";

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("[data-copy-from]") : null;
    var field = button && document.getElementById(button.dataset.copyFrom);
    if (!field) {
      return;
    }
    field.select();
    (navigator.clipboard ? navigator.clipboard.writeText(field.value) : Promise.reject())
      .catch(function () { document.execCommand("copy"); })
      .then(function () { button.textContent = "Copied"; });
  });
})();
