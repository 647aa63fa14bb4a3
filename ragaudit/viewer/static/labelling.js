// ragaudit's labelling page: one item at a time, one POST per key, resumes where you stopped.
// Every text that came from a run is written with textContent, never as HTML.
"use strict";

(function () {
  const NAME_KEY = "ragaudit.annotator";
  const page = location.pathname.replace(/\/+$/, "");
  const api = page + "/api";
  const runBase = page.replace(/\/label$/, "");
  const $ = (id) => document.getElementById(id);
  const root = document.documentElement;

  const state = { annotator: null, pos: 0, total: 0, labelled: 0, item: null, busy: false };

  function setState(name) {
    root.dataset.state = name;
    root.dataset.position = String(state.pos);
  }

  function status(text) {
    $("status").textContent = text || "";
  }

  async function call(url, options) {
    const response = await fetch(url, options);
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const detail = body && body.detail;
      throw new Error(typeof detail === "string" ? detail : "the server answered " + response.status);
    }
    return body;
  }

  function who() {
    const box = $("who");
    box.replaceChildren();
    box.append("labelling as ");
    const name = document.createElement("strong");
    name.textContent = state.annotator;
    box.append(name, " · ");
    const change = document.createElement("button");
    change.type = "button";
    change.textContent = "change";
    change.addEventListener("click", () => {
      localStorage.removeItem(NAME_KEY);
      askName();
    });
    box.append(change);
  }

  function askName() {
    $("item").hidden = true;
    $("done").hidden = true;
    $("who").replaceChildren();
    $("progress").textContent = "";
    $("name-form").hidden = false;
    $("name").focus();
    setState("name");
  }

  function progress() {
    $("progress").textContent =
      "item " + Math.min(state.pos + 1, state.total) + " of " + state.total +
      " · " + state.labelled + " labelled by you";
  }

  // Where the person's label of the item was given: this page, another page where the same
  // pair appeared (it counts here too, and is not asked again), or an imported source.
  function givenText(item) {
    const given = item.given;
    if (!given) return "";
    const when = given.time ? ", " + given.time.slice(0, 19).replace("T", " ") + " UTC" : "";
    if (given.here) return " (given on this page" + when + ")";
    return " (given on " + (given.given_in || "another page") + when + "; it counts here too)";
  }

  function labelText(item) {
    if (!item.labelled) return "";
    if (item.label === null) return "you skipped this item" + givenText(item);
    const choice = item.choices.find((c) => c.label === item.label);
    return "your label: " + (choice ? choice.key + " " + choice.text : String(item.label)) +
      givenText(item);
  }

  // A turn's earlier turns, oldest first, each as text; those its judge was not shown dimmed.
  function history(item) {
    const turns = item.history || [];
    const list = $("history");
    list.replaceChildren();
    let cut = 0;
    for (const turn of turns) {
      const li = document.createElement("li");
      const role = document.createElement("span");
      role.className = "role";
      role.textContent = turn.role === "assistant" ? "Assistant:" : "User:";
      li.append(role, document.createTextNode(turn.text));
      if (turn.cut) {
        li.classList.add("cut");
        cut += 1;
      }
      list.append(li);
    }
    $("history-cut").textContent = cut
      ? cut + " earlier turn(s) dimmed: the judge was not shown them"
      : "";
    $("history-box").hidden = turns.length === 0;
    $("question-title").textContent = turns.length ? "The question now" : "Question";
  }

  function render(item) {
    state.item = item;
    $("instruction").textContent = item.instruction;
    history(item);
    $("question").textContent = item.question || "(question text missing from the run)";
    const isGrade = item.kind === "grade";
    $("candidate-box").hidden = !isGrade;
    $("answer-box").hidden = isGrade;
    $("contexts-box").hidden = isGrade || !item.contexts;
    if (isGrade) {
      $("candidate").textContent = item.candidate || "(passage text missing from the run)";
    } else {
      $("answer").textContent = item.answer || "(no answer)";
      const list = $("contexts");
      list.replaceChildren();
      for (const text of item.contexts || []) {
        const li = document.createElement("li");
        li.textContent = text;
        list.append(li);
      }
    }
    const box = $("choices");
    box.replaceChildren();
    for (const choice of item.choices) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.key = choice.key;
      const key = document.createElement("kbd");
      key.textContent = choice.key;
      button.append(key, " " + choice.text);
      if (item.labelled && item.label === choice.label) button.classList.add("given");
      button.addEventListener("click", () => answer(choice.label));
      box.append(button);
    }
    const skip = document.createElement("button");
    skip.type = "button";
    skip.dataset.key = "s";
    const skey = document.createElement("kbd");
    skey.textContent = "s";
    skip.append(skey, " skip");
    skip.addEventListener("click", () => answer(null));
    box.append(skip);
    $("given").textContent = labelText(item);
    $("done").hidden = true;
    $("item").hidden = false;
    progress();
  }

  async function show(pos) {
    state.busy = true;
    setState("busy");
    try {
      const item = await call(
        api + "/items/" + pos + "?annotator=" + encodeURIComponent(state.annotator)
      );
      state.pos = pos;
      render(item);
      status("");
      state.busy = false;
      setState("ready");
    } catch (e) {
      status(e.message);
      state.busy = false;
      setState("error");
    }
  }

  function done() {
    state.pos = state.total;
    $("item").hidden = true;
    $("done").hidden = false;
    $("done-count").textContent =
      state.labelled + " of " + state.total + " items labelled by you. Thank you.";
    $("export-csv").href = runBase + "/labels.csv";
    $("export-qrels").href =
      runBase + "/labels.qrels?annotator=" + encodeURIComponent(state.annotator);
    progress();
    setState("done");
  }

  async function answer(label) {
    if (state.busy || !state.item) return;
    state.busy = true;
    setState("busy");
    const item = state.item;
    try {
      const saved = await call(api + "/labels", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          position: state.pos,
          item_id: item.item_id,
          annotator: state.annotator,
          label: label,
        }),
      });
      state.labelled = typeof saved.labelled === "number" ? saved.labelled : state.labelled + 1;
      state.busy = false;
      if (saved.next >= state.total) {
        done();
      } else {
        await show(saved.next);
      }
    } catch (e) {
      status("not saved: " + e.message);
      state.busy = false;
      setState("error");
    }
  }

  function back() {
    if (state.busy || state.pos <= 0) return;
    show(state.pos - 1);
  }

  async function begin() {
    $("name-form").hidden = true;
    who();
    try {
      const start = await call(api + "/start?annotator=" + encodeURIComponent(state.annotator));
      $("run").textContent = start.run_id;
      state.total = start.total;
      state.labelled = start.labelled;
      if (start.resume >= start.total) {
        done();
      } else {
        await show(start.resume);
      }
    } catch (e) {
      status(e.message);
      setState("error");
    }
  }

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    if (key === "b" || key === "Backspace") {
      event.preventDefault();
      back();
      return;
    }
    if ($("item").hidden || !state.item) return;
    if (key === "s") {
      event.preventDefault();
      answer(null);
      return;
    }
    const choice = state.item.choices.find((c) => c.key === key.toLowerCase());
    if (choice) {
      event.preventDefault();
      answer(choice.label);
    }
  });

  document.addEventListener("DOMContentLoaded", () => {
    // Back to the run's page, built afresh with every label given here.
    $("run-page").href = runBase;
    $("name-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const name = $("name").value.trim();
      if (!name) return;
      localStorage.setItem(NAME_KEY, name);
      state.annotator = name;
      begin();
    });
    $("review").addEventListener("click", () => show(state.total - 1));
    // `ragaudit label --annotator NAME` opens the page with the name in its address.
    const given = (new URLSearchParams(location.search).get("annotator") || "").trim();
    if (given) localStorage.setItem(NAME_KEY, given);
    state.annotator = localStorage.getItem(NAME_KEY);
    if (state.annotator) {
      begin();
    } else {
      askName();
    }
  });
})();
