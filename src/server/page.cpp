#include "server/page.h"

#include <fmt/format.h>

#include "core/judge_factory.h"

namespace klspec::server {
namespace {

constexpr std::string_view kJudgeOptionsMarker = "<!--judge options-->";

// The streamed chunks' `spans` are the text cut into tokens, each with its provenance (and for relaxed
// tokens the judge's statistic): one coloured <span> each. The last chunk's `speculative` object gives MAT
// and the relaxed count.
constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>klspec serve</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 60em; padding: 0 1em; color: #222; }
  h1 { font-size: 1.3em; margin: 0 0 .6em; }
  textarea { width: 100%; box-sizing: border-box; font: 14px monospace; }
  .knobs { display: flex; flex-wrap: wrap; gap: .5em 1em; margin: .6em 0; }
  .knobs label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
  .knobs input, .knobs select { width: 8.5em; font-size: 14px; }
  button { font-size: 15px; padding: .3em 1.2em; }
  #output { white-space: pre-wrap; font: 16px/1.7 monospace; border: 1px solid #ccc; border-radius: 4px;
            padding: .7em; min-height: 6em; margin-top: .8em; }
  #output .prompt { color: #777; }
  .tok { border-radius: 3px; }
  .draft { background: #b9ecb9; }
  .relaxed { background: #ffb347; outline: 1px solid #d97b00; }
  .target { background: #c9dcff; }
  .legend span { padding: 0 .4em; margin-right: .6em; }
  #summary { margin-top: .6em; font-weight: 600; }
  #summary.error { color: #b00020; }
</style>
</head>
<body>
<h1>klspec serve: judge decoding, token by token</h1>
<form id="form">
  <textarea id="prompt" rows="3">Once upon a time</textarea>
  <div class="knobs">
    <label>judge <select id="judge"><!--judge options--></select></label>
    <label>judge_threshold <input id="judge_threshold" type="number" step="any" placeholder="default"></label>
    <label>judge_topk <input id="judge_topk" type="number" step="1" placeholder="default"></label>
    <label>confidence_mask <input id="confidence_mask" type="number" step="any" placeholder="default"></label>
    <label>draft_max <input id="draft_max" type="number" step="1" placeholder="default"></label>
    <label>temperature <input id="temperature" type="number" step="any" placeholder="default"></label>
    <label>max_tokens <input id="max_tokens" type="number" step="1" placeholder="default"></label>
  </div>
  <button id="generate" type="submit">Generate</button>
</form>
<p class="legend">
  <span class="tok draft">accepted draft <b id="count-draft">0</b></span>
  <span class="tok relaxed">relaxed by the judge <b id="count-relaxed">0</b></span>
  <span class="tok target">target token <b id="count-target">0</b></span>
</p>
<div id="output"></div>
<div id="summary"></div>
<script>
"use strict";
const knobs = ["judge", "judge_threshold", "judge_topk", "confidence_mask", "draft_max", "temperature", "max_tokens"];
const $ = (id) => document.getElementById(id);
const counts = { draft: 0, relaxed: 0, target: 0 };
const tooltips = {
  draft: () => "draft token, accepted by the vanilla test",
  relaxed: (s) => "draft token the target disagreed with, kept by the judge" +
                  (s.judge_statistic === undefined ? "" : ": statistic " + s.judge_statistic.toPrecision(4)),
  target: () => "the target's own token",
};

function requestBody() {
  const body = { prompt: $("prompt").value, stream: true };
  for (const knob of knobs) {
    const value = $(knob).value.trim();
    if (value !== "") body[knob] = knob === "judge" ? value : Number(value);
  }
  return body;
}

function showSpans(spans) {
  for (const s of spans) {
    const span = document.createElement("span");
    span.className = "tok " + s.provenance;
    span.textContent = s.text;
    span.title = tooltips[s.provenance](s);
    $("output").appendChild(span);
  }
}

function countTokens(provenance) {
  for (const p of provenance) $("count-" + p).textContent = ++counts[p];
}

function showSummary(chunk) {
  const spec = chunk.speculative;
  $("summary").textContent = `MAT ${spec.mat.toFixed(2)} · relaxed ${spec.relaxed} · accepted ${spec.accepted} of ` +
    `${spec.drafted} drafted · ${spec.target_calls} target calls · ${chunk.usage.completion_tokens} tokens · ` +
    `judge ${spec.judge} · finish ${chunk.choices[0].finish_reason}`;
}

function showChunk(chunk) {
  const choice = chunk.choices[0];
  showSpans(choice.spans || []);
  countTokens(choice.provenance || []);
  if (chunk.speculative) showSummary(chunk);
}

function showError(message) {
  $("summary").className = "error";
  $("summary").textContent = "error: " + message;
}

// XMLHttpRequest rather than fetch: its progress events stream the events just as well, and a headless
// browser's virtual time (--virtual-time-budget) waits for it until the body ends, not only the headers.
function generate() {
  $("output").replaceChildren();
  const prompt = document.createElement("span");
  prompt.className = "prompt";
  prompt.textContent = $("prompt").value;
  $("output").appendChild(prompt);
  for (const p in counts) $("count-" + p).textContent = counts[p] = 0;
  $("summary").className = "";
  $("summary").textContent = "generating…";
  $("generate").disabled = true;
  const request = new XMLHttpRequest();
  let parsed = 0;  // characters of responseText already shown
  const showEvents = () => {
    let end;
    while ((end = request.responseText.indexOf("\n\n", parsed)) >= 0) {
      const event = request.responseText.slice(parsed, end);
      parsed = end + 2;
      if (event.startsWith("data: ") && event !== "data: [DONE]") showChunk(JSON.parse(event.slice(6)));
    }
  };
  request.open("POST", "/v1/completions");
  request.setRequestHeader("Content-Type", "application/json");
  request.onprogress = () => { if (request.status === 200) showEvents(); };
  request.onload = () => {
    if (request.status === 200) showEvents();
    else showError(JSON.parse(request.responseText).error.message);
  };
  request.onerror = () => showError("the server did not answer");
  request.onloadend = () => { $("generate").disabled = false; };
  request.send(JSON.stringify(requestBody()));
}

$("form").addEventListener("submit", (event) => { event.preventDefault(); generate(); });
const query = new URLSearchParams(location.search);
for (const field of ["prompt", ...knobs]) if (query.has(field)) $(field).value = query.get(field);
if (query.get("run") === "1") generate();
</script>
</body>
</html>
)html";

std::string escape_html(std::string_view text) {
    std::string out;
    for (const char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

}  // namespace

std::string page_html(std::string_view default_rule) {
    std::string options = fmt::format(R"(<option value="">server default ({})</option>)", escape_html(default_rule));
    for (const JudgeRule& rule : judge_rules())
        options += fmt::format(R"(<option value="{0}" title="{1}">{0}</option>)", escape_html(rule.name),
                               escape_html(rule.summary));
    std::string page(kPage);
    page.replace(page.find(kJudgeOptionsMarker), kJudgeOptionsMarker.size(), options);
    return page;
}

}  // namespace klspec::server
