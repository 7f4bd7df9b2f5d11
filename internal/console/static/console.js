// kafkamender console: the live parts, and nothing else. Progress and state changes come
// from one server-sent event stream (/ui/live); an event page waiting for its result
// listens on /ui/live/result/<id>. No polling.
(function () {
  "use strict";
  function onReady(f) {
    if (document.readyState !== "loading") f(); else document.addEventListener("DOMContentLoaded", f);
  }
  // busy reports whether the user is in the middle of something on the page.
  function busy() {
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA")) return true;
    return document.querySelector("details[open]") !== null;
  }
  onReady(function () {
    var progress = document.querySelectorAll("[data-progress]");
    var state = document.querySelector("[data-live=state]");
    if (progress.length || state) {
      var es = new EventSource("/ui/live");
      es.addEventListener("progress", function (e) {
        var p = JSON.parse(e.data);
        document.querySelectorAll("[data-progress]").forEach(function (el) {
          if (el.getAttribute("data-progress") !== p.id) return;
          var bar = el.querySelector("progress");
          if (bar) bar.value = p.percent;
          var text = el.querySelector(".text");
          if (text) text.textContent = p.text;
          el.setAttribute("data-bytes", String(p.bytes_copied));
          el.setAttribute("data-updated", p.at);
        });
      });
      es.addEventListener("state", function (e) {
        if (!state) return;
        var d = JSON.parse(e.data);
        if (state.getAttribute("data-digest") === d) return;
        if (busy()) {
          // Someone is typing a reason or has a cancel open: no reload under their
          // fingers; a line says the page is behind.
          var stale = document.getElementById("stale");
          if (stale) stale.hidden = false;
          return;
        }
        es.close();
        window.location.reload();
      });
    }
    var wait = document.querySelector("[data-wait-result]");
    if (wait) {
      var rs = new EventSource("/ui/live/result/" + encodeURIComponent(wait.getAttribute("data-wait-result")));
      rs.addEventListener("result", function () {
        rs.close();
        window.location.reload();
      });
    }
  });
})();
