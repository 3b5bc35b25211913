#!/usr/bin/env python3
"""Multi-turn chat through `klspec serve`, with and without its prompt cache, and through llama-server: what
keeping a slot's KV cells between requests saves on a conversation whose history grows each turn.

Each conversation has T turns (--turns, default 8): a fixed system message, then a fixed list of 8 user
messages (short stories and arithmetic; conversation c starts at message c, so no two conversations share
more than the system message). Turn t POSTs the whole conversation so far (the system message, the user
messages and the answers this server gave to the earlier ones) to /v1/chat/completions with stream=true,
max_tokens M (--max-tokens, default 64) and temperature 0, and records the time to the first token (the
first chunk with non-empty content), the whole request's time, and the server's usage.prompt_tokens and
usage.prompt_tokens_details.cached_tokens (llama-server's timings.prompt_n and cache_n as well). C
conversations (--conversations, default 1) run one after another, or --concurrency at once.

The script starts each server itself on a free loopback port, sends one short warm-up completion (unrelated
to the conversations), runs the conversations and stops it; the servers take turns, R times (--repeats,
default 3): A B C A B C ...
  A  klspec serve (prompt caching on, its default)
  B  klspec serve --no-cache-prompt
  C  llama-server with the same target, -md the same draft (--spec-type draft-simple, gamma 16), the same
     -np, -t and context per slot, --chat-template chatml; only with --llama-server. llama-server caps a
     slot's context at the model's training context (512 for the testbed pair, which 8 turns outgrow: HTTP
     400), so it gets --override-kv ARCH.context_length=int:CTX like klspec serve's -c, which has no cap
It prints the CPU, then per turn the median time to first token of A, B and C (over repeats and
conversations), A's cached_tokens / prompt_tokens, and the ratios B/A and C/A at the last turn: the cache
should make A at least 3x faster than B there, and no slower than C.

  bench/serving/serve_multiturn.py --klspec build/klspec -t 2 --check \\
      --llama-server ~/.cache/klspec/llama.cpp-*/install/bin/llama-server
  bench/serving/serve_multiturn.py -m build/models/testbed-target-w4-f3-l12-Q4_K_M.gguf -md models/testbed-draft.gguf \\
      -t 2 --repeats 2 --llama-server ...

With --check, every answer of A must equal B's at the same turn of the same conversation and repeat (greedy
decoding on both; the cache must not change the output), else the run fails (exit 1) and names the first
turn that differs (each server continues its own history, so everything after it differs too). --json
prints one JSON object instead of the table. Standard library only."""
import argparse
import concurrent.futures
import http.client
import json
import os
import shlex
import statistics
import struct
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import (ROOT, TESTBED_DRAFT, TESTBED_TARGET, Server, cpu_header, fmt,  # noqa: E402
                          llama_server_args, print_cpu_and_commands)
from serve_load import request_headers

SYSTEM = "You are a helpful assistant. You tell short stories for children and solve small arithmetic problems."
USER_MESSAGES = [
    "Tell me a short story about a cat who finds a red ball.",
    "Q: Sam has 12 apples. He buys 7 more. How many apples does Sam have?",
    "Now tell me a story about a little girl named Lily and her dog.",
    "Q: A box holds 6 eggs. How many eggs are in 4 boxes?",
    "Tell me a story about a bird that could not fly.",
    "Q: Ann reads 15 pages a day. How many pages does she read in 3 days?",
    "Tell me a story about Tom and his friend at the park.",
    "Q: There are 20 birds on a tree. 8 fly away. How many birds are left?",
]
SERVERS = ("A", "B", "C")
TITLES = {"A": "klspec serve (cache)", "B": "klspec serve --no-cache-prompt", "C": "llama-server"}


def chat_request(url, messages, max_tokens):
    """Streams one chat completion; returns its record: ttft and seconds, text, finish reason, the usage and
    timings figures the server sent (None where absent)."""
    parts = urllib.parse.urlsplit(url)
    body = {"messages": messages, "max_tokens": max_tokens, "stream": True, "temperature": 0,
            "stream_options": {"include_usage": True}}
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    start = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", json.dumps(body), request_headers())
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read().decode(errors='replace')[:300]}")
    ttft, text, finish, usage, timings, done = None, "", None, {}, {}, False
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
            break
        chunk = json.loads(payload)
        for choice in chunk.get("choices", []):
            content = (choice.get("delta") or {}).get("content") or ""
            if content and ttft is None:
                ttft = time.perf_counter() - start
            text += content
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage") or usage
        timings = chunk.get("timings") or timings
    seconds = time.perf_counter() - start
    connection.close()
    if not done or finish is None:
        raise RuntimeError("the stream ended without a finish reason and [DONE]")
    return {"ttft": ttft if ttft is not None else seconds, "seconds": seconds, "text": text, "finish": finish,
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            "prompt_n": timings.get("prompt_n"), "cache_n": timings.get("cache_n")}


def conversation(url, index, args):
    """Conversation `index`: T turns, each sending the whole history; returns one record per turn."""
    messages, records = [{"role": "system", "content": SYSTEM}], []
    for turn in range(args.turns):
        messages.append({"role": "user", "content": USER_MESSAGES[(index + turn) % len(USER_MESSAGES)]})
        record = chat_request(url, messages, args.max_tokens)
        record.update(conversation=index, turn=turn + 1)
        records.append(record)
        messages.append({"role": "assistant", "content": record["text"]})
    return records


def warm_up(url):
    """One short completion unrelated to the conversations: the first request's one-time costs (pages of the
    weights, thread start-up) are not charged to turn 1."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    connection.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 8,
                                                              "temperature": 0}), request_headers())
    response = connection.getresponse()
    response.read()
    connection.close()
    if response.status != 200:
        sys.exit(f"serve_multiturn: the warm-up request got HTTP {response.status}")


def gguf_architecture(path):
    """general.architecture of a GGUF file (its metadata is read until that key)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # the fixed-size value types
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            sys.exit(f"serve_multiturn: {path} is not a GGUF file")
        _version, _tensors, n_kv = struct.unpack("<IQQ", f.read(20))

        def string():
            return f.read(struct.unpack("<Q", f.read(8))[0]).decode(errors="replace")

        def skip(kind):
            if kind == 8:
                string()
            elif kind == 9:
                inner, count = struct.unpack("<IQ", f.read(12))
                for _ in range(count):
                    skip(inner)
            else:
                f.seek(sizes[kind], 1)
        for _ in range(n_kv):
            key, kind = string(), struct.unpack("<I", f.read(4))[0]
            if key == "general.architecture":
                return string()
            skip(kind)
    sys.exit(f"serve_multiturn: {path} has no general.architecture")


def server_command(which, args):
    if which == "C":
        override = f"--override-kv {gguf_architecture(args.model)}.context_length=int:{args.ctx_size}"
        return [args.llama_server] + shlex.split(llama_server_args(
            args.model, args.model_draft, args.parallel, args.ctx_size, args.threads,
            extra=f"--chat-template {shlex.quote(args.chat_template)} {override} {args.llama_server_args}"))
    command = [args.klspec, "serve", "-m", args.model, "-md", args.model_draft, "-np", args.parallel,
               "-t", args.threads, "-c", args.ctx_size, "--chat-template", args.chat_template]
    return command + (["--no-cache-prompt"] if which == "B" else []) + shlex.split(args.server_args)


def run_server(which, args):
    """Starts server `which`, warms it up, runs the conversations; returns (records, its command)."""
    with Server(server_command(which, args), TITLES[which]) as server:
        warm_up(server.url)
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            futures = [pool.submit(conversation, server.url, c, args) for c in range(args.conversations)]
            try:
                records = [record for future in futures for record in future.result()]
            except (OSError, RuntimeError, ValueError) as error:
                sys.exit(f"serve_multiturn: {TITLES[which]}: {error}; its log ends {server.log_tail()}")
        return records, shlex.join(server.command).replace(str(ROOT) + "/", "")


def check(runs):
    """A's answers against B's, turn by turn, for each repeat and conversation: the failures (first differing
    turn of each), empty when all equal."""
    failures = []
    for repeat, (a_records, b_records) in enumerate(zip(runs["A"], runs["B"])):
        b_by_key = {(r["conversation"], r["turn"]): r for r in b_records}
        first = {}
        for a in sorted(a_records, key=lambda r: (r["conversation"], r["turn"])):
            b = b_by_key[(a["conversation"], a["turn"])]
            if a["text"] != b["text"] and a["conversation"] not in first:
                first[a["conversation"]] = (a, b)
        for conv, (a, b) in sorted(first.items()):
            failures.append(f"repeat {repeat + 1}, conversation {conv + 1}: the answers first differ at turn "
                            f"{a['turn']}: with cache {a['text'][:80]!r}, without {b['text'][:80]!r}")
    return failures


def first_difference(runs, x, y):
    """The first turn where server x's answer differs from server y's in the first repeat (None: none differs)."""
    if not runs.get(x) or not runs.get(y):
        return None
    by_key = {(r["conversation"], r["turn"]): r["text"] for r in runs[y][0]}
    turns = [r["turn"] for r in runs[x][0] if r["text"] != by_key[(r["conversation"], r["turn"])]]
    return min(turns) if turns else None


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs, args):
    per_turn = []
    for turn in range(1, args.turns + 1):
        row = {"turn": turn}
        for which, repeats in runs.items():
            records = [r for records in repeats for r in records if r["turn"] == turn]
            row[which] = {"ttft_ms": 1000 * statistics.median(r["ttft"] for r in records),
                          "seconds_ms": 1000 * statistics.median(r["seconds"] for r in records),
                          "prompt_tokens": median_or_none(r["prompt_tokens"] for r in records),
                          "cached_tokens": median_or_none(r["cached_tokens"] for r in records),
                          "cache_n": median_or_none(r["cache_n"] for r in records),
                          "prompt_n": median_or_none(r["prompt_n"] for r in records),
                          "completion_tokens": median_or_none(r["completion_tokens"] for r in records)}
        per_turn.append(row)
    last = per_turn[-1]
    ratios = {f"{which}/A": last[which]["ttft_ms"] / last["A"]["ttft_ms"] for which in ("B", "C") if which in last}
    return per_turn, ratios


def print_table(summary):
    print_cpu_and_commands(summary["cpu"], summary["commands"])
    a = summary["args"]
    print(f"{a['conversations']} conversation(s) of {a['turns']} turns, {a['concurrency']} at once, max_tokens "
          f"{a['max_tokens']}, temperature 0, {a['repeats']} repeats interleaved; medians over repeats and "
          "conversations (ms)\n")
    has_c = "C" in summary["per_turn"][0]
    head = "turn  prompt  A ttft  B ttft" + ("  C ttft" if has_c else "") + "  A cached/prompt" + \
        ("  C cached/prompt" if has_c else "") + "  A total  B total" + ("  C total" if has_c else "")
    print(head)
    for row in summary["per_turn"]:
        cells = [f"{row['turn']:>4}", f"{fmt(row['A']['prompt_tokens'], '.0f'):>6}"]
        cells += [f"{row[w]['ttft_ms']:>6.0f}" for w in SERVERS if w in row]
        cells.append(f"{fmt(row['A']['cached_tokens'], '.0f') + '/' + fmt(row['A']['prompt_tokens'], '.0f'):>15}")
        if has_c:
            cells.append(f"{fmt(row['C']['cached_tokens'], '.0f') + '/' + fmt(row['C']['prompt_tokens'], '.0f'):>15}")
        cells += [f"{row[w]['seconds_ms']:>7.0f}" for w in SERVERS if w in row]
        print("  ".join(cells))
    turn = summary["per_turn"][-1]["turn"]
    ratios = summary["ratios"]
    line = f"\nturn {turn}: B/A TTFT {ratios['B/A']:.2f}x (goal >= 3: {'met' if ratios['B/A'] >= 3 else 'NOT met'})"
    if "C/A" in ratios:
        line += f", C/A TTFT {ratios['C/A']:.2f}x (goal >= 1: {'met' if ratios['C/A'] >= 1 else 'NOT met'})"
    print(line)
    for key, value in summary["answers"].items():
        print(f"{key}: {value}")
    failures = summary["check_failures"]
    if summary["checked"]:
        print(f"check: {len(failures)} failed" + (": " + "; ".join(failures[:3]) if failures else
                                                 " (every A answer equals B's at the same turn)"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", default=str(ROOT / "build" / "klspec"), help="klspec binary (default %(default)s)")
    parser.add_argument("--llama-server", default=None, help="llama.cpp's llama-server binary: also run C")
    parser.add_argument("-m", "--model", default=str(TESTBED_TARGET), help="target (default: the default pair's)")
    parser.add_argument("-md", "--model-draft", default=str(TESTBED_DRAFT), help="draft (default: the default pair's)")
    parser.add_argument("-np", "--parallel", type=int, default=1, help="slots of every server (default %(default)s)")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="threads (default %(default)s)")
    parser.add_argument("-c", "--ctx-size", type=int, default=2048,
                        help="context per slot (llama-server gets -c this times -np; default %(default)s)")
    parser.add_argument("--chat-template", default="chatml", help="of every server (default %(default)s)")
    parser.add_argument("--turns", type=int, default=8, help="turns per conversation (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens of each turn (default %(default)s)")
    parser.add_argument("--conversations", type=int, default=1, help="conversations per run (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=1, help="conversations at once (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each server, interleaved (default %(default)s)")
    parser.add_argument("--server-args", default="", help="more flags for klspec serve (A and B)")
    parser.add_argument("--llama-server-args", default="", help="more flags for llama-server (C)")
    parser.add_argument("--check", action="store_true", help="fail unless every A answer equals B's")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.turns < 1 or args.conversations < 1 or args.concurrency < 1 or args.repeats < 1:
        parser.error("--turns, --conversations, --concurrency and --repeats must be at least 1")

    order = [w for w in SERVERS if w != "C" or args.llama_server]
    runs, commands = {w: [] for w in order}, {}
    for repeat in range(args.repeats):
        for which in order:
            started = time.perf_counter()
            records, commands[which] = run_server(which, args)
            runs[which].append(records)
            print(f"[repeat {repeat + 1}/{args.repeats}] {which} {TITLES[which]}: {time.perf_counter() - started:.1f} s",
                  file=sys.stderr, flush=True)

    per_turn, ratios = summarize(runs, args)
    failures = check(runs) if args.check else []
    answers = {
        "A answers stable across repeats": all(
            [r["text"] for r in records] == [r["text"] for r in runs["A"][0]] for records in runs["A"]),
        "first turn where A's answer differs from B's (repeat 1)": first_difference(runs, "A", "B"),
    }
    if "C" in runs:
        answers["first turn where llama-server's answer differs from A's (repeat 1)"] = first_difference(runs, "C", "A")
    uncached_b = [r["cached_tokens"] for records in runs["B"] for r in records if r["cached_tokens"]]
    if uncached_b:
        answers["B reported cached tokens despite --no-cache-prompt"] = max(uncached_b)
    summary = {"cpu": cpu_header(), "args": vars(args), "commands": commands, "per_turn": per_turn,
               "ratios": ratios, "answers": answers, "checked": args.check, "check_failures": failures,
               "records": runs}
    if args.json:
        print(json.dumps(summary))
    else:
        print_table(summary)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
