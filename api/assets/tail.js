// The live tail: appends what the session's log stream sends. The only script of the console;
// everything else works without JavaScript.
"use strict";
(function () {
  var pre = document.getElementById("live-tail");
  if (!pre || !window.EventSource) { return; }
  var source = new EventSource(pre.getAttribute("data-source"));
  var first = true;
  source.onmessage = function (event) {
    if (first) { pre.textContent = ""; first = false; }
    pre.textContent += event.data + "\n";
  };
  source.addEventListener("end", function () { source.close(); });
})();
