// sharpen viewer: CSRF header for HTMX, j/k between steps, text selection -> span annotation.
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]');
  document.body.addEventListener("htmx:configRequest", function (e) {
    if (csrf) { e.detail.headers["X-CSRF-Token"] = csrf.content; }
  });
  document.body.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt;
    if (e.detail.successful && form.classList && form.classList.contains("annotate")) {
      form.querySelector('[name="text"]').value = "";
      form.querySelector('[name="score"]').value = "";
      clearSpan(form);
    }
  });

  function steps() { return Array.prototype.slice.call(document.querySelectorAll("article.step")); }
  function current() {
    var list = steps(), id = location.hash.slice(1);
    for (var i = 0; i < list.length; i++) { if (list[i].id === id) { return i; } }
    return -1;
  }
  function go(i) {
    var list = steps();
    if (i >= list.length) { var next = document.querySelector('a[rel="next"]'); if (next) { location.href = next.href.split("#")[0] + "#step-" + (parseInt(list[list.length - 1].dataset.step, 10) + 1); } return; }
    if (i < 0) { return; }
    history.replaceState(null, "", "#" + list[i].id);
    list.forEach(function (s) { s.classList.remove("current"); });
    list[i].classList.add("current");
    list[i].scrollIntoView({block: "start"});
    list[i].focus({preventScroll: true});
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    if (e.key === "j") { go(current() + 1); e.preventDefault(); }
    if (e.key === "k") { go(Math.max(0, current() - 1)); e.preventDefault(); }
  });
  if (location.hash.indexOf("#step-") === 0) {
    var el = document.getElementById(location.hash.slice(1));
    if (el) { el.classList.add("current"); }
  }

  function clearSpan(form) {
    form.querySelector('[name="span_start"]').value = "";
    form.querySelector('[name="span_end"]').value = "";
    form.querySelector(".span-preview").textContent = "";
  }
  document.addEventListener("mouseup", function () {
    var sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) { return; }
    var range = sel.getRangeAt(0);
    var node = range.startContainer.nodeType === 1 ? range.startContainer : range.startContainer.parentElement;
    var pre = node && node.closest("pre.msg-text");
    if (!pre || !pre.contains(range.endContainer)) { return; }
    var step = pre.closest("article.step");
    var form = step && step.querySelector("form.annotate");
    if (!form) { return; }
    var before = document.createRange();
    before.selectNodeContents(pre);
    before.setEnd(range.startContainer, range.startOffset);
    var base = parseInt(pre.dataset.offset, 10) || 0;
    var start = base + before.toString().length;
    var text = range.toString();
    form.querySelector('[name="span_start"]').value = String(start);
    form.querySelector('[name="span_end"]').value = String(start + text.length);
    form.querySelector(".span-preview").textContent = "span [" + start + ", " + (start + text.length) + "): \u201c" + text.slice(0, 80) + "\u201d";
  });
})();
