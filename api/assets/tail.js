// What a running session's pages follow live: the log tail, which appends what the session's
// log stream sends, keeping the newest lines; and on the session page, the phase under way in the
// timeline, grown with the clock. The only script of the console; everything else works without
// JavaScript (the timeline then shows the time so far when the page was made).
"use strict";
(function () {
  var KEPT = 2000;
  var pre = document.getElementById("live-tail");
  if (pre && window.EventSource) {
    var lines = [];
    var source = new EventSource(pre.getAttribute("data-source"));
    var show = function () { pre.textContent = lines.join("\n"); };
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
  }

  // Every bar keeps its milliseconds (data-ms); the running one's grow from when the page was
  // made, and every bar is laid out again by its share of the new whole.
  var svg = document.querySelector("svg.timeline[data-running]");
  if (!svg) { return; }
  var left = parseFloat(svg.getAttribute("data-left"));
  var width = parseFloat(svg.getAttribute("data-width"));
  var bars = svg.querySelectorAll("rect.bar");
  var labels = svg.querySelectorAll("text.ms");
  var running = svg.querySelector("rect.running");
  if (!running || bars.length !== labels.length) { return; }
  var base = parseFloat(running.getAttribute("data-ms"));
  var loaded = Date.now();
  setInterval(function () {
    running.setAttribute("data-ms", String(base + Date.now() - loaded));
    var total = 0, at = 0, i;
    for (i = 0; i < bars.length; i++) { total += parseFloat(bars[i].getAttribute("data-ms")); }
    total = Math.max(total, 1);
    for (i = 0; i < bars.length; i++) {
      var ms = parseFloat(bars[i].getAttribute("data-ms"));
      var x = left + width * at / total;
      var w = Math.max(width * ms / total, 1);
      bars[i].setAttribute("x", x.toFixed(1));
      bars[i].setAttribute("width", w.toFixed(1));
      labels[i].setAttribute("x", (x + w + 6).toFixed(1));
      labels[i].textContent = Math.round(ms) + " ms" + (bars[i] === running ? " so far" : "");
      at += ms;
    }
  }, 1000);
})();
