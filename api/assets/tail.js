// The live tail: appends what the session's log stream sends, keeping the newest lines. The
// only script of the console; everything else works without JavaScript.
"use strict";
(function () {
  var KEPT = 2000;
  var pre = document.getElementById("live-tail");
  if (!pre || !window.EventSource) { return; }
  var lines = [];
  var source = new EventSource(pre.getAttribute("data-source"));
  function show() { pre.textContent = lines.join("\n"); }
  source.onmessage = function (event) {
    lines.push(event.data);
    if (lines.length > KEPT) { lines.splice(0, lines.length - KEPT); }
    show();
  };
  source.addEventListener("end", function (event) {
    source.close();
    lines.push("(" + event.data + ": reload the page for the whole log)");
    show();
  });
})();
