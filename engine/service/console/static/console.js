// codeact console: live updates of a running session over Server-Sent Events.
// The server renders (and escapes) every fragment; this script only places them in the page.
(function () {
  "use strict";
  var script = document.currentScript;
  var url = script && script.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var after = script.getAttribute("data-after") || "0";
  var rounds = document.getElementById("rounds");
  var progress = document.getElementById("in-progress");
  var interactions = document.getElementById("interactions");
  var statusBox = document.getElementById("live-status");
  var source = new EventSource(url + "?after=" + encodeURIComponent(after));

  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }
  function json(event) { try { return JSON.parse(event.data); } catch (e) { return null; } }

  source.addEventListener("round", function (event) {
    var data = json(event);
    if (!data || document.getElementById("round-" + data.index)) { return; }
    var empty = document.getElementById("no-rounds");
    if (empty) { empty.remove(); }
    rounds.appendChild(fragment(data.html));
    var count = document.getElementById("round-count");
    if (count) { count.textContent = String(rounds.querySelectorAll("article.round").length); }
  });
  source.addEventListener("progress", function (event) {
    var data = json(event);
    if (data) { progress.replaceChildren(fragment(data.html)); }
  });
  source.addEventListener("interactions", function (event) {
    var data = json(event);
    if (!data) { return; }
    var focused = interactions.contains(document.activeElement);
    interactions.replaceChildren(fragment(data.html));
    var first = interactions.querySelector("textarea, button");
    if (first && (focused || data.count > 0)) { first.focus(); }
  });
  source.addEventListener("status", function (event) {
    var data = json(event);
    if (!data) { return; }
    var status = document.getElementById("session-status");
    if (status) { status.textContent = data.status; }
    statusBox.textContent = data.text || "";
  });
  // Answer an approval or a question without leaving the page (a plain form POST without script).
  interactions.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("interaction")) { return; }
    event.preventDefault();
    var body = new URLSearchParams(new FormData(form, event.submitter));
    form.querySelectorAll("button, textarea").forEach(function (el) { el.disabled = true; });
    fetch(form.action, { method: "POST", body: body, credentials: "same-origin" }).then(function (answer) {
      if (answer.ok && form.classList.contains("question-answer")) {
        // The answer started a new run of the session: load the page again, which follows it live.
        window.location.assign(form.action.replace(/\/interact$/, ""));
        return;
      }
      if (answer.ok) {
        form.replaceChildren(document.createTextNode("Sent: the run goes on."));
        form.setAttribute("data-sent", "1");
        return;
      }
      return answer.text().then(function (text) {
        form.querySelectorAll("button, textarea").forEach(function (el) { el.disabled = false; });
        statusBox.textContent = text;
      });
    });
  });
  source.addEventListener("end", function () {
    source.close();
    progress.replaceChildren();
  });
})();
