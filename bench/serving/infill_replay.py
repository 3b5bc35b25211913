#!/usr/bin/env python3
"""An editing session replayed against several /infill servers: time to first token, completion latency,
prompt reuse and, for klspec, each judge's acceptance (issue 61).

The script "types" through real source files, HumanEval's canonical solutions (--source humaneval, the
default: each problem a file whose signature and docstring are on disk and whose solution is typed) or Python
files of your own (--source PATH: typed from the top), and at the end of each typed line sends the request
llama.vim (../shared/clients/llama.vim, autoload/llama.vim, llama#fim) sends there, with its defaults:
input_prefix the 256 lines above, prompt the current line, input_suffix the 64 below, n_indent the line's
indentation, n_predict 128, t_max_prompt_ms 500, t_max_predict_ms 250 (the plug-in's first request at a
position), cache_prompt, top_k 40, top_p 0.90, id_slot 0, response_fields, and input_extra, the plug-in's ring
buffer of chunks (up to 16 of up to 64 lines): picked from a file when it is entered, saved and left and from
far above and below the cursor, moved from the queue into the ring when the editor idles (here: between two
files), each move sending the plug-in's background request (n_predict 0) that evaluates the new extra context,
and evicted when like the text at the cursor; its random choices come from --seed. The same request sequence
is built once and sent to every server. What differs from the plug-in's requests, and why:
  - "temperature": 0 and samplers ["top_k", "top_p", "temperature"] (llama.vim sends no temperature and
    samplers top_k, top_p, infill, so llama-server samples at random): greedy answers can be compared;
  - response_fields also name tokens_evaluated, stop_type, timings/cache_n, timings/draft_n,
    timings/draft_n_accepted, tokens and speculative (with return_tokens): what this report needs;
  - blank lines send nothing (the plug-in sends one with an empty prompt there), and neither does the follow-up
    request the plug-in sends after showing a suggestion (it depends on the answer, so the servers would get
    different sequences). A request whose local context was already sent is skipped, as the plug-in's cache does.

The servers, each started by the script on a free loopback port, one after another, fresh (cold cache; with
--interleave all at once, each request sent to each in turn, so that drift in the machine's speed falls on all), with
`-c` (default 32768), `-b` (1024) and `--cache-reuse 256` as scripts/serve-fim.sh, -t threads:
  klspec JUDGE          `klspec serve -m TARGET -md DRAFT`, every request naming the judge (--judges, default
                        vanilla and kl:0.3; judges are request fields, so one server command serves them all)
  klspec mixed          the same server, the judges alternating request by request: each answer is compared
                        with that of its judge's own run (no request's output may depend on another request's
                        judge; a lossy judge's only under a fixed gamma, see --check)
  llama-server γG       llama-server -m TARGET -md DRAFT --spec-type draft-simple --spec-draft-n-max G -np 1
                        -ub B (--llama-gammas, default 4,16)
  llama-server          llama-server -m TARGET -np 1: no draft
  klspec JUDGE FLAGS    with --klspec-variant FLAGS: the first judge's server with FLAGS added
klspec loads targets repacked (its patched kernels keep verification exact: docs/repacked-kernels.md) and caches
their V in BF16; llama-server gets -ctv bf16 so that both run the same kernels and cache (--llama-defaults: its own F16
V cache, what its --fim-qwen presets run).

Per server it reports, over the typed-line requests (the background ones are counted apart): time to first
token (timings.prompt_ms: the prompt's evaluation, after which the first token is sampled) and completion
latency (wall clock, request sent to answer read) at p50 and p95, prompt tokens evaluated per request
(timings.prompt_n) and as a fraction of the prompt (prompt_n / tokens_evaluated, the rest came from the cache:
timings.cache_n), tokens generated, draft tokens (timings draft_n) and their acceptance (draft_n_accepted /
draft_n) and, for klspec, MAT (generated tokens per target call, from `speculative`; a request's first token
comes from the prompt's logits without a target call, so a request decoded without drafts shows n / (n - 1)
for its n tokens); for every llama-server how many answers are token for
token klspec vanilla's (greedy and lossless both; an answer cut earlier by t_max_predict_ms that is a prefix
of the other counts apart), and for the mixed run how many answers are those of their judge's own run. The
CPU (lscpu) is printed above the table.

  bench/serving/infill_replay.py --limit 200                   # the real pair (scripts/fetch-real-model.sh)
  bench/serving/infill_replay.py -m T.gguf -md D.gguf -c 2048 --source bench/lib/bench_common.py --limit 4

--json prints one JSON object (the settings, the commands, the summary and every request's record) instead,
--json-out FILE writes it beside the table.
Exit status 1 on bad input, a server that does not start or an HTTP error (one line on stderr), and with
--check when an answer that must be equal is not. Standard library only.
"""
import argparse
import contextlib
import gzip
import hashlib
import http.client
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import ROOT, Server, cpu_header, fmt, pinned_llama_server, print_cpu_and_commands  # noqa: E402
from serve_load import percentile  # noqa: E402

PROG = "infill_replay"
# llama.vim's defaults (autoload/llama.vim, s:default_config) that shape its /infill requests.
N_PREFIX, N_SUFFIX, N_PREDICT = 256, 64, 128
T_MAX_PROMPT_MS, T_MAX_PREDICT_MS_FIRST = 500, 250
RING_N_CHUNKS, RING_CHUNK_SIZE, RING_QUEUE_MAX = 16, 64, 16
RING_SCOPE, MAX_LINE_SUFFIX = 1024, 8
LLAMA_VIM_RESPONSE_FIELDS = [
    "content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second",
    "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_token_ms", "timings/predicted_per_second",
    "truncated", "tokens_cached"]
REPORT_FIELDS = ["tokens_evaluated", "stop_type", "timings/cache_n", "timings/draft_n", "timings/draft_n_accepted",
                 "tokens", "speculative"]


def fail(message):
    sys.exit(f"{PROG}: error: {message}")


# ---------------------------------------------------------------------------------------------------------------
# The editor: llama.vim's local context, ring buffer and request bodies, emulated on a buffer of lines.

def vim_words(lines):
    """split(join(lines, "\\n"), '\\W\\+'): Vim's \\W is [^0-9A-Za-z_]."""
    return [w for w in re.split(r"[^0-9A-Za-z_]+", "\n".join(lines)) if w]


def chunk_sim(c0, c1):
    """s:chunk_sim: 2 * (words of c1 found in c0) / (words of both); 1 when both are empty."""
    words0, words1 = vim_words(c0), vim_words(c1)
    if not words0 and not words1:
        return 1.0
    seen = set(words0)
    return 2.0 * sum(w in seen for w in words1) / (len(words0) + len(words1))


class Editor:
    """llama.vim's state across buffers: the ring of chunks, its queue, the response cache's keys, the last
    line a chunk was picked at; and the buffer being typed (1-based lines as Vim's getline)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.ring, self.queued, self.hashes = [], [], set()
        self.pos_y_pick = -9999
        self.clock = 0  # reltime() of the chunks: a counter of requests, sent as [seconds, microseconds]
        self.lines, self.filename, self.modified = [], "", False

    def rand(self, i0, i1):  # s:rand
        return self.rng.randint(i0, i1)

    def getline(self, first, last):
        """getline(first, last): [] when first > last; lines outside the buffer are not there."""
        first = max(first, 1)
        return self.lines[first - 1:last] if first <= last else []

    def around_cursor(self, y):  # the range BufEnter, BufLeave, BufWritePost and the eviction in llama#fim use
        half = RING_CHUNK_SIZE // 2
        return self.getline(max(1, y - half), min(y + half, len(self.lines)))

    def random_half(self, text):
        """A random slice of ring_chunk_size/2 + 1 lines (Vim's inclusive text[l0:l1])."""
        l0 = self.rand(0, max(0, len(text) - RING_CHUNK_SIZE // 2))
        l1 = min(l0 + RING_CHUNK_SIZE // 2, len(text))
        return text[l0:l1 + 1]

    def pick_chunk(self, text, no_mod, do_evict):
        """s:pick_chunk: queue a chunk of text unless it is there already or (without do_evict) like one."""
        if no_mod and (self.modified or not self.lines):  # a buffer with pending changes, or not yet a file
            return
        if len(text) < 3:
            return
        chunk = list(text) if len(text) + 1 < RING_CHUNK_SIZE else self.random_half(text)
        if any(c["data"] == chunk for c in self.ring + self.queued):
            return
        for pool in (self.queued, self.ring):
            for i in range(len(pool) - 1, -1, -1):
                if chunk_sim(pool[i]["data"], chunk) > 0.9:
                    if not do_evict:
                        return
                    del pool[i]
        if len(self.queued) == RING_QUEUE_MAX:
            del self.queued[0]
        self.clock += 1
        self.queued.append({"data": chunk, "str": "\n".join(chunk) + "\n", "time": [self.clock, 0],
                            "filename": self.filename})

    def extra(self):  # s:ring_get_extra
        return [{"text": c["str"], "time": c["time"], "filename": c["filename"]} for c in self.ring]

    def ring_update(self):
        """s:ring_update while the editor idles: one queued chunk into the ring, and the request that evaluates
        the new extra context; None when nothing is queued."""
        if not self.queued:
            return None
        if len(self.ring) == RING_N_CHUNKS:
            del self.ring[0]
        self.ring.append(self.queued.pop(0))
        return {"id_slot": 0, "input_prefix": "", "input_suffix": "", "input_extra": self.extra(), "prompt": "",
                "n_predict": 0, "temperature": 0.0, "samplers": [], "stream": False, "cache_prompt": True,
                "t_max_prompt_ms": 1, "t_max_predict_ms": 1, "model": "",
                "response_fields": ["", "tokens_evaluated", "timings/prompt_n", "timings/cache_n"]}

    def fim(self, y, x, args):
        """llama#fim at line y, column x (0-based byte offset) as the plug-in's auto trigger sends it (is_auto,
        use_cache, no previous completion); None where the plug-in sends nothing."""
        line = self.lines[y - 1]
        prefix_lines = self.getline(max(1, y - N_PREFIX), y - 1)
        suffix_lines = self.getline(y + 1, min(len(self.lines), y + N_SUFFIX))
        if re.match(r"^\s*$", line):
            indent, line_prefix, line_suffix = 0, "", ""
        else:
            indent, line_prefix, line_suffix = len(re.match(r"^\s*", line).group(0)), line[:x], line[x:]
        prefix = "\n".join(prefix_lines) + "\n"
        suffix = line_suffix + "\n" + "\n".join(suffix_lines) + "\n"
        if len(line_suffix) > MAX_LINE_SUFFIX:
            return None
        # The response cache's keys: a request whose context (or the context less up to 3 first lines) was
        # answered before is not sent.
        keys, trimmed = [prefix + line_prefix + "Î" + suffix], prefix
        for _ in range(3):
            trimmed = re.sub(r"^[^\n]*\n", "", trimmed, count=1)
            if not trimmed:
                break
            keys.append(trimmed + line_prefix + "Î" + suffix)
        keys = [hashlib.sha256(k.encode()).hexdigest() for k in keys]
        if any(k in self.hashes for k in keys):
            return None
        self.hashes.update(keys)  # the answer is cached under all of them
        # Chunks much like the text around the cursor are evicted (they make the model repeat it).
        local = self.random_half(self.around_cursor(y))
        self.ring = [c for c in self.ring if chunk_sim(c["data"], local) <= 0.5]
        body = {"id_slot": 0, "input_prefix": prefix, "input_suffix": suffix, "input_extra": self.extra(),
                "prompt": line_prefix, "n_predict": args.n_predict, "stop": [], "n_indent": indent,
                "top_k": 40, "top_p": 0.90, "samplers": ["top_k", "top_p", "temperature"], "temperature": 0,
                "stream": False, "cache_prompt": True, "t_max_prompt_ms": T_MAX_PROMPT_MS,
                "t_max_predict_ms": args.t_max_predict_ms,
                "response_fields": LLAMA_VIM_RESPONSE_FIELDS + REPORT_FIELDS, "return_tokens": True, "model": ""}
        # Far from where it last picked, the plug-in queues chunks from further above and below the cursor.
        if abs(y - self.pos_y_pick) > 32:
            last = len(self.lines)
            self.pick_chunk(self.getline(max(1, y - RING_SCOPE), max(1, y - N_PREFIX)), False, False)
            self.pick_chunk(self.getline(min(last, y + N_SUFFIX), min(last, y + N_SUFFIX + RING_CHUNK_SIZE)),
                            False, False)
            self.pos_y_pick = y
        return body


def source_files(args):
    """(filename, text on disk when opened, text typed after it) per file, in typing order."""
    files = []
    for source in args.source:
        if source == "humaneval":
            path = Path(args.data_dir) / "humaneval" / "HumanEval.jsonl.gz"
            if not path.is_file():
                fail(f"{path} not found (--data-dir: the folder of HumanEval/, ../shared/datasets by default)")
            with gzip.open(path, "rt") as f:
                for line in f:
                    problem = json.loads(line)
                    name = problem["task_id"].replace("/", "_") + ".py"
                    files.append((name, problem["prompt"], problem["canonical_solution"]))
        else:
            path = Path(source)
            if not path.is_file():
                fail(f"--source {source}: no such file (humaneval, or a Python file to type)")
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as error:
                fail(f"--source {source}: {error}")
            name = os.path.relpath(path.resolve(), ROOT) if path.resolve().is_relative_to(ROOT) else path.name
            files.append((name, "", text))
    return files


def session(args):
    """The whole session's requests, in order: ("fim", body, where) for each typed line's request, ("ring",
    body, None) for each background one; at most --limit of the first kind."""
    editor, events, n_fim = Editor(args.seed), [], 0
    for name, given, typed in source_files(args):
        if editor.lines:  # leaving the last file, saved: BufWritePost, then BufLeave, pick around the cursor
            editor.modified = False
            y = len(editor.lines)
            editor.pick_chunk(editor.around_cursor(y), True, True)
            editor.pick_chunk(editor.around_cursor(y), True, True)
        editor.filename, editor.lines, editor.modified = name, given.splitlines(), False
        editor.pick_chunk(editor.around_cursor(1), True, True)  # BufEnter, the cursor on line 1
        while (body := editor.ring_update()) is not None:  # the editor idles a few seconds between files
            if not args.no_ring_requests:
                events.append(("ring", body, None))
        for line in typed.splitlines():
            editor.lines.append(line)
            editor.modified = True
            if not line.strip():
                continue
            body = editor.fim(len(editor.lines), len(line), args)
            if body is None:
                continue
            events.append(("fim", body, f"{name}:{len(editor.lines)}"))
            n_fim += 1
            if args.limit and n_fim >= args.limit:
                return events
    return events


# ---------------------------------------------------------------------------------------------------------------
# The servers.

def judge_fields(setting):
    """The request fields of a judge setting: vanilla, kl:TAU, topk:K, topn-delta:N/DELTA or RULE:THRESHOLD."""
    rule, _, value = setting.partition(":")
    try:
        if rule == "vanilla" and not value:
            return {"judge": "vanilla"}
        if rule == "topk":
            return {"judge": "topk", "judge_topk": int(value)}
        if rule == "topn-delta":
            n, _, delta = value.partition("/")
            return {"judge": rule, "judge_topk": int(n), "judge_threshold": float(delta)}
        if rule and value:
            return {"judge": rule, "judge_threshold": float(value)}
    except ValueError:
        pass
    fail(f"--judges: bad setting '{setting}' (vanilla, kl:TAU, topk:K, topn-delta:N/DELTA, RULE:THRESHOLD)")


def default_model(name):
    done = subprocess.run(["bash", str(ROOT / "scripts/fetch-real-model.sh"), name], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        fail(f"scripts/fetch-real-model.sh {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip().splitlines()[-1]


def server_runs(args):
    """(name, command, per-request judge fields or None, role) for every server run, in order."""
    common = ["-c", str(args.ctx_size), "-b", str(args.batch_size), "--cache-reuse", "256", "-t", str(args.threads)]
    klspec = [args.klspec, "serve", "-m", args.model, "-md", args.model_draft, *common,
              *shlex.split(args.klspec_args)]
    runs = [(f"klspec {s}", klspec, [judge_fields(s)], "judge") for s in args.judges]
    if len(args.judges) > 1:
        runs.append(("klspec mixed", klspec, [judge_fields(s) for s in args.judges], "mixed"))
    runs += [(f"klspec {args.judges[0]} {flags}", klspec + shlex.split(flags), [judge_fields(args.judges[0])],
              "variant") for flags in args.klspec_variant]
    if args.llama_server:
        llama = [args.llama_server, "-m", args.model, "-np", "1", "-ub", str(args.batch_size), "--no-webui", *common,
                 *([] if args.llama_defaults else ["-ctv", "bf16"]), *shlex.split(args.llama_server_args)]
        for gamma in args.llama_gammas:
            runs.append((f"llama-server γ{gamma}", llama + ["-md", args.model_draft, "-td", str(args.threads),
                                                             "--spec-type", "draft-simple",
                                                             "--spec-draft-n-max", str(gamma)], None, "llama"))
        if args.llama_target_only:
            runs.append(("llama-server", llama, None, "llama"))
    return runs


def post(url, path, body, timeout):
    """One request as llama.vim's curl sends it (a new connection, its headers); (seconds, answer)."""
    host, port = url.split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    start = time.perf_counter()
    try:
        connection.request("POST", path, json.dumps(body),
                           {"Content-Type": "application/json", "Authorization": "Bearer "})
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        connection.close()
    seconds = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {text[:300]}")
    return seconds, json.loads(text)


def warm_up(url, timeout):
    """One short completion sharing no prefix with the session's prompts (they start with <|repo_name|> or
    <|fim_prefix|>): the weights are paged in, and the first request still finds nothing cached."""
    post(url, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0}, timeout)


@contextlib.contextmanager
def started(name, command, args):
    """The server running on a free loopback port, weights paged in by a warm-up request."""
    try:
        with Server(command, name, timeout=args.start_timeout) as server:
            warm_up(server.url, args.request_timeout)
            yield server
    except SystemExit as stop:  # bench_common.Server's own message when the server does not start
        if isinstance(stop.code, str) and stop.code.startswith("bench: "):
            fail(stop.code.removeprefix("bench: "))
        raise


class Replay:
    """One server's side of the session: its judges' fields, the records of what it answered so far."""

    def __init__(self, name, judges, server):
        self.name, self.judges, self.server = name, judges, server
        self.records, self.n_fim, self.seconds = [], 0, 0.0

    def send(self, event, args):
        kind, body, where = event
        if kind == "fim" and self.judges:
            body = {**body, **self.judges[self.n_fim % len(self.judges)]}
        try:
            seconds, answer = post(self.server.url, "/infill", body, args.request_timeout)
        except (OSError, RuntimeError, ValueError) as error:
            fail(f"{self.name}: request {self.n_fim} ({len(self.records)} sent): {error}; "
                 f"its log ends {self.server.log_tail()}")
        self.seconds += seconds
        record = {"kind": kind, "where": where, "seconds": seconds}
        if kind == "fim":
            record.update(request=self.n_fim, judge=body.get("judge"), **answer)
            self.n_fim += 1
        else:
            record.update(answer)
        self.records.append(record)


def replay(runs, events, args):
    """Sends the session to every run's server: {name: its records}. One server after another, each fresh; with
    --interleave all at once, each event to each server in turn, the order rotated by one per event, so that the
    machine's drift in speed (30 % within an hour on the VMs here) falls on every server alike."""
    records = {}
    for group in ([runs] if args.interleave else [[run] for run in runs]):
        with contextlib.ExitStack() as stack:
            replays = [Replay(name, judges, stack.enter_context(started(name, command, args)))
                       for name, command, judges, _ in group]
            for i, event in enumerate(events):
                for replay_ in replays[i % len(replays):] + replays[:i % len(replays)]:
                    replay_.send(event, args)
        for replay_ in replays:
            records[replay_.name] = replay_.records
            print(f"[{replay_.name}] {replay_.n_fim} requests, {replay_.seconds:.1f} s answering", file=sys.stderr,
                  flush=True)
    return records


# ---------------------------------------------------------------------------------------------------------------
# The report.

def compare(ours, reference):
    """equal, prefix (one answer a prefix of the other: a t_max_predict_ms cut) or differ."""
    a, b = ours.get("tokens"), reference.get("tokens")
    if a is None or b is None:
        return "differ"
    if a == b:
        return "equal"
    n = min(len(a), len(b))
    return "prefix" if a[:n] == b[:n] else "differ"


def tally(pairs):
    """How many answers are equal, a prefix or different, the first that differs, and how many prompts differ
    in length (tokens_evaluated: the same request must give the same prompt everywhere)."""
    counts = {"equal": 0, "prefix": 0, "differ": 0, "prompt_length_differs": 0}
    first = None
    for ours, reference in pairs:
        verdict = compare(ours, reference)
        counts[verdict] += 1
        counts["prompt_length_differs"] += ours.get("tokens_evaluated") != reference.get("tokens_evaluated")
        if verdict == "differ" and first is None:
            first = ours["request"]
    return {**counts, "first_differing_request": first}


def summarize(name, role, records, reference):
    fims = [r for r in records if r["kind"] == "fim"]
    rings = [r for r in records if r["kind"] == "ring"]

    def col(key):
        return [r.get(key) for r in fims if r.get(key) is not None]

    ttft, wall = col("timings/prompt_ms"), [1000 * r["seconds"] for r in fims]
    prompt_n, prompt_len = col("timings/prompt_n"), col("tokens_evaluated")
    fractions = [r["timings/prompt_n"] / r["tokens_evaluated"] for r in fims
                 if r.get("tokens_evaluated") and r.get("timings/prompt_n") is not None]
    drafted, accepted = sum(col("timings/draft_n")), sum(col("timings/draft_n_accepted"))
    spec = [r["speculative"] for r in fims if r.get("speculative")]
    target_calls = sum(s.get("target_calls", 0) for s in spec)
    generated, predicted_ms = col("timings/predicted_n"), col("timings/predicted_ms")
    out = {
        "server": name, "role": role, "requests": len(fims),
        "ttft_ms_p50": statistics.median(ttft) if ttft else None, "ttft_ms_p95": percentile(ttft, 95) if ttft else None,
        "latency_ms_p50": statistics.median(wall) if wall else None,
        "latency_ms_p95": percentile(wall, 95) if wall else None,
        "prompt_tokens_mean": statistics.mean(prompt_len) if prompt_len else None,
        "prompt_n_mean": statistics.mean(prompt_n) if prompt_n else None,
        "prompt_n_p50": statistics.median(prompt_n) if prompt_n else None,
        "cache_n_mean": statistics.mean(col("timings/cache_n")) if col("timings/cache_n") else None,
        "evaluated_fraction": sum(prompt_n) / sum(prompt_len) if prompt_len and sum(prompt_len) else None,
        "evaluated_fraction_p50": statistics.median(fractions) if fractions else None,
        "generated_mean": statistics.mean(generated) if generated else None,
        "generated_per_second": 1000 * sum(generated) / sum(predicted_ms) if sum(predicted_ms) else None,
        "drafted": drafted, "acceptance": accepted / drafted if drafted else None,
        "relaxed": sum(s.get("relaxed", 0) for s in spec) if spec else None,
        "mat": sum(generated) / target_calls if spec and target_calls else None,
        "background_requests": len(rings),
        "background_prompt_n": sum(r.get("timings/prompt_n") or 0 for r in rings),
    }
    if reference is not None:
        out["vs_reference"] = tally(zip(fims, [r for r in reference if r["kind"] == "fim"]))
    return out


def independence(runs, settings):
    """Per judge setting, the mixed run's answers with it against that judge's own run, request by request."""
    mixed = [r for r in runs.get("klspec mixed", ([], ""))[0] if r["kind"] == "fim"]
    if not mixed:
        return None
    out = {}
    for setting in settings:
        own = [r for r in runs[f"klspec {setting}"][0] if r["kind"] == "fim"]
        out[setting] = tally((r, own[r["request"]]) for r in mixed if r["setting"] == setting)
        out[setting]["requests"] = sum(r["setting"] == setting for r in mixed)
    return out


def print_report(report):
    print_cpu_and_commands(report["cpu"], report["commands"])
    a = report["args"]
    print(f"\n{report['n_fim']} typed-line requests ({', '.join(a['source'])}; n_predict {a['n_predict']}, "
          f"t_max_predict_ms {a['t_max_predict_ms']}, greedy) and {report['n_ring']} background ring updates; "
          f"times in ms; 'evaluated' = timings.prompt_n, 'of prompt' = prompt_n / tokens_evaluated over all "
          + (f"requests; 'greedy = ref' compares tokens with {report['reference']}'s\n" if report["reference"]
             else "requests\n"))
    width = max(22, *(len(s["server"]) for s in report["servers"]))
    head = (f"{'server':<{width}} {'TTFT p50':>8} {'p95':>7} {'latency p50':>11} {'p95':>7} {'prompt':>7} "
            f"{'evaluated':>9} {'of prompt':>9} {'generated':>9} {'tok/s':>6} {'drafted':>7} {'accept':>6} {'MAT':>5}  "
            "greedy = ref")
    print(head)
    for s in report["servers"]:
        ref = s.get("vs_reference")
        same = "-" if ref is None else (f"{ref['equal']}/{s['requests']}" + (f" (+{ref['prefix']} cut)" if ref["prefix"]
                                                                             else "")
                                        + (f", first diff #{ref['first_differing_request']}" if ref["differ"] else ""))
        print(f"{s['server']:<{width}} {fmt(s['ttft_ms_p50'], '.1f'):>8} {fmt(s['ttft_ms_p95'], '.1f'):>7} "
              f"{fmt(s['latency_ms_p50'], '.1f'):>11} {fmt(s['latency_ms_p95'], '.1f'):>7} "
              f"{fmt(s['prompt_tokens_mean'], '.0f'):>7} {fmt(s['prompt_n_mean'], '.1f'):>9} "
              f"{fmt(s['evaluated_fraction'], '.1%'):>9} {fmt(s['generated_mean'], '.1f'):>9} "
              f"{fmt(s['generated_per_second'], '.1f'):>6} {s['drafted']:>7} "
              f"{fmt(s['acceptance'], '.0%'):>6} {fmt(s['mat'], '.2f'):>5}  {same}")
    if report["independence"] is not None:
        cells = [f"{setting} {t['equal']}/{t['requests']}" + (f" (+{t['prefix']} cut)" if t["prefix"] else "")
                 + (f", first diff #{t['first_differing_request']}" if t["differ"] else "")
                 for setting, t in report["independence"].items()]
        print("\njudges per request: klspec mixed's answers equal to those of their judge's own run: "
              + "; ".join(cells))
        if any(t["differ"] for s, t in report["independence"].items() if s != "vanilla"):
            print("  (a lossy judge's answer depends on the draft lengths; the automatic gamma follows measured costs, "
                  "so compare lossy judges with --klspec-args '--draft-policy fixed')")
    print("background ring updates (n_predict 0), prompt tokens evaluated: " + ", ".join(
        f"{s['server']} {s['background_prompt_n']}" for s in report["servers"]))
    for line in report["ratios"]:
        print(line)
    for failure in report["check_failures"]:
        print(f"check failed: {failure}")


def ratios(servers):
    """klspec's judge and variant runs against each llama-server run: p50 latency, p50 time to first token and
    prompt tokens evaluated, as ratios."""
    def ratio(ours, theirs, key):
        return ours[key] / theirs[key] if ours[key] is not None and theirs[key] else None

    lines = []
    for ours in (s for s in servers if s["role"] in ("judge", "variant")):
        for theirs in (s for s in servers if s["role"] == "llama"):
            lines.append(f"{ours['server']} / {theirs['server']}: p50 latency "
                         f"{fmt(ratio(ours, theirs, 'latency_ms_p50'), '.2f')}x, TTFT "
                         f"{fmt(ratio(ours, theirs, 'ttft_ms_p50'), '.2f')}x, prompt tokens evaluated "
                         f"{fmt(ratio(ours, theirs, 'prompt_n_mean'), '.2f')}x")
    return lines


def parse_list(text, kind):
    items = [x.strip() for x in text.split(",") if x.strip()]
    try:
        return [kind(x) for x in items]
    except ValueError:
        fail(f"bad list '{text}'")


def main():
    parser = argparse.ArgumentParser(prog="infill_replay.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", help="target GGUF (default: the real pair's, scripts/fetch-real-model.sh "
                        "qwen2.5-coder-1.5b)")
    parser.add_argument("-md", "--model-draft", help="draft GGUF (default: qwen2.5-coder-0.5b)")
    parser.add_argument("--source", action="append", help="humaneval (default), or a Python file to type; repeat "
                        "for more, typed in that order")
    parser.add_argument("--data-dir", default=os.environ.get("KLSPEC_DATA_DIR", str(ROOT.parent / "shared/datasets")),
                        help="where humaneval/HumanEval.jsonl.gz is (default %(default)s)")
    parser.add_argument("--limit", type=int, default=0, help="typed-line requests at most (0: the whole session)")
    parser.add_argument("--klspec", default=str(ROOT / "build/klspec"), help="klspec binary (default %(default)s)")
    parser.add_argument("--llama-server", default=pinned_llama_server(),
                        help="llama-server binary, '' for none (default: the pinned build's, %(default)s)")
    parser.add_argument("--judges", default="vanilla,kl:0.3",
                        help="klspec's judge settings, one run each, and with two or more a mixed run (default "
                        "%(default)s); vanilla's answers are the greedy reference llama-server's are compared with")
    parser.add_argument("--llama-gammas", default="4,16", help="llama-server runs with the draft, one per "
                        "--spec-draft-n-max ('' for none; default %(default)s)")
    parser.add_argument("--no-llama-target-only", dest="llama_target_only", action="store_false",
                        help="no llama-server run without the draft")
    parser.add_argument("-c", "--ctx-size", type=int, default=32768, help="context of every server (one slot; "
                        "default %(default)s, scripts/serve-fim.sh's)")
    parser.add_argument("-b", "--batch-size", type=int, default=1024, help="batch (and llama-server's -ub) of "
                        "every server (default %(default)s)")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="threads of every server and "
                        "draft (default %(default)s)")
    parser.add_argument("--n-predict", type=int, default=N_PREDICT, help="n_predict (default %(default)s, llama.vim's)")
    parser.add_argument("--t-max-predict-ms", type=int, default=T_MAX_PREDICT_MS_FIRST,
                        help="t_max_predict_ms (default %(default)s, llama.vim's first request; 0: none, so greedy "
                        "answers can be compared in full)")
    parser.add_argument("--no-ring-requests", action="store_true",
                        help="do not send the plug-in's background requests (n_predict 0) that evaluate the ring's new "
                        "chunks; the chunks still reach the typed-line requests")
    parser.add_argument("--seed", type=int, default=0, help="the editor's random choices (default %(default)s)")
    parser.add_argument("--klspec-args", default="", help="more klspec serve flags")
    parser.add_argument("--llama-server-args", default="", help="more llama-server flags")
    parser.add_argument("--klspec-variant", action="append", default=[], metavar="FLAGS",
                        help="one more klspec serve run with these flags too (the first judge), compared with the "
                        "first judge's run but not --check'ed (e.g. '--repack-prompt'); repeatable")
    parser.add_argument("--llama-defaults", "--llama-repack", action="store_true",
                        help="llama-server at its own defaults, what its --fim-qwen presets run: V cached in F16 (its "
                             "greedy answers may then leave klspec's at near ties); --llama-repack, its name when "
                             "klspec's targets loaded unrepacked, is kept for the commands in docs/server.md")
    parser.add_argument("--interleave", action="store_true",
                        help="run every server at once and send each request to each in turn (the order rotated "
                        "request by request), instead of one server after another: ratios then hold when the "
                        "machine's speed drifts during the run (each server still has its own cache and slot)")
    parser.add_argument("--start-timeout", type=float, default=300, help="seconds a server may take to start")
    parser.add_argument("--request-timeout", type=float, default=600, help="seconds a request may take")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every llama-server answer equals klspec vanilla's and every vanilla "
                        "answer of the mixed run the vanilla run's (answers cut by t_max_predict_ms: on their "
                        "common length)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--json-out", metavar="FILE", help="also write that JSON object to FILE")
    parser.add_argument("--requests-only", action="store_true",
                        help="print the session's requests, one JSON object a line ({kind, where, body}), and exit: "
                        "no server is started")
    args = parser.parse_args()
    args.source = args.source or ["humaneval"]
    args.judges = parse_list(args.judges, str)
    args.llama_gammas = parse_list(args.llama_gammas, int)
    if not args.judges:
        fail("--judges is empty")
    for setting in args.judges:
        judge_fields(setting)
    if args.limit < 0 or args.n_predict < 0 or args.t_max_predict_ms < 0 or args.ctx_size < 1 or args.batch_size < 1:
        fail("--limit, --n-predict and --t-max-predict-ms must be >= 0, -c and -b >= 1")
    if args.json_out and not Path(args.json_out).resolve().parent.is_dir():
        fail(f"--json-out {args.json_out}: no such folder")
    if any(g < 1 for g in args.llama_gammas):
        fail("--llama-gammas must be >= 1")
    events = session(args)  # before the models: bad input fails at once
    n_fim = sum(kind == "fim" for kind, _, _ in events)
    if n_fim == 0:
        fail("the sources gave no request")
    if args.requests_only:
        for kind, body, where in events:
            print(json.dumps({"kind": kind, "where": where, "body": body}))
        return 0
    if not Path(args.klspec).is_file():
        fail(f"{args.klspec}: no klspec binary (build it: bash scripts/build.sh, or give --klspec)")
    if args.llama_server and not Path(args.llama_server).is_file():
        fail(f"{args.llama_server}: no llama-server binary (bash scripts/build-llama.sh, or --llama-server '')")
    args.model = args.model or default_model("qwen2.5-coder-1.5b")
    args.model_draft = args.model_draft or default_model("qwen2.5-coder-0.5b")
    for path in (args.model, args.model_draft):
        if not Path(path).is_file():
            fail(f"{path}: no such model file")

    plan = server_runs(args)
    commands = {name: shlex.join(command).replace(str(ROOT) + "/", "") for name, command, _, _ in plan}
    replies = replay(plan, events, args)
    runs = {}
    for name, _, judges, role in plan:
        records = replies[name]
        if judges:
            for record in records:
                if record["kind"] == "fim":
                    record["setting"] = args.judges[record["request"] % len(judges)] if role == "mixed" \
                        else name.removeprefix("klspec ")
        runs[name] = (records, role)

    # Greedy answers that must be equal: every llama-server's and klspec vanilla's (lossless both), and each
    # vanilla request of the mixed run and the vanilla run's. A lossy judge's answer depends on the draft lengths,
    # which the automatic gamma picks from measured costs: its independence is reported, not checked.
    reference_name = "klspec vanilla" if "vanilla" in args.judges else None
    reference = runs[reference_name][0] if reference_name else None
    servers = [summarize(name, role, records, reference if role in ("llama", "variant") else None)
               for name, (records, role) in runs.items()]
    ind = independence(runs, args.judges)
    failures = []
    for s in (s for s in servers if s["role"] == "llama"):  # a variant may change answers (--repack-prompt)
        if s.get("vs_reference") and s["vs_reference"]["differ"]:
            failures.append(f"{s['server']}: {s['vs_reference']['differ']} answer(s) differ from {reference_name}'s "
                            f"(first: request {s['vs_reference']['first_differing_request']})")
        if s.get("vs_reference") and s["vs_reference"]["prompt_length_differs"]:
            failures.append(f"{s['server']}: {s['vs_reference']['prompt_length_differs']} prompt(s) of another length "
                            f"than {reference_name}'s (tokens_evaluated)")
    if ind and ind.get("vanilla", {}).get("differ"):
        failures.append(f"klspec mixed: {ind['vanilla']['differ']} vanilla answer(s) differ from the vanilla run's "
                        f"(first: request {ind['vanilla']['first_differing_request']})")
    report = {"cpu": cpu_header(),
              "args": {k: v for k, v in vars(args).items()}, "commands": commands, "n_fim": n_fim,
              "n_ring": sum(kind == "ring" for kind, _, _ in events), "reference": reference_name,
              "servers": servers, "independence": ind, "ratios": ratios(servers),
              "check_failures": failures if args.check else [],
              "records": {name: records for name, (records, _) in runs.items()}}
    if args.json_out:
        try:
            Path(args.json_out).write_text(json.dumps(report) + "\n")
        except OSError as error:
            fail(f"--json-out: {error}")
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
