#!/usr/bin/env python3
"""Load test of a running `klspec serve`: C concurrent streaming clients send N completions in all, or
keep sending for --duration seconds; prints requests/s, generated tokens/s and latency percentiles (whole
request and first chunk).

  klspec serve -np 4 &
  bench/serving/serve_load.py --url http://127.0.0.1:8080 --concurrency 8 --requests 32 --max-tokens 96

With --cli (the `klspec generate` command of the server's models, e.g. "build/klspec generate -t 1"),
every response is checked: complete (a finish reason and [DONE]) and, decoding greedily, equal to what
the CLI prints for its prompt; any other answer fails the run. --duration adds the speed goals, measured
in the same run: total tokens/s of the C clients against one client for as long, and one request's
tokens/s through the server against the CLI's for the same prompt.

  bench/serving/serve_load.py --duration 60 --concurrency 8 --cli "build/klspec generate -t 1"

With --llama-server (the path of llama.cpp's llama-server), the same workload then runs against it in the
same run, started by the script with the default pair (the target and `-md` its draft), and both are
printed side by side; its answers are checked for completeness only (a different engine).

  bench/serving/serve_load.py --llama-server ~/.cache/klspec/llama.cpp-*/install/bin/llama-server

With --api-key KEY (a server started with --api-key KEY), every request carries `Authorization: Bearer KEY`,
and the llama-server the script starts gets --api-key KEY too.

With --engine (`klspec bench` with the server's models and options), the engine's own throughput on the same
prompts, without HTTP, at -np 1 and -np C: what the server's figures should be near.
With --prompts FILE (JSON lines with a "question" or "prompt" field, e.g. data/testbed_word_test.jsonl) and
--limit N, the clients send those prompts instead of the built-in eight: the benchmark's own text, on which a
testbed target's acceptance is what the speed report measures.
Standard library only. Token counts are the server's own (usage in the final chunk)."""
import argparse
import concurrent.futures
import http.client
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import Server, llama_server_args  # noqa: E402

PROMPTS = [  # the stories260K openings of tests/engine/test_support.cpp, and GSM8K-style questions
    "Once upon a time",
    "One day, a little girl named Lily",
    "Tom and his dog went to the park.",
    "Q: Sam has 12 apples. He buys 7 more. How many apples does Sam have?\nA:",
    "Q: A box holds 6 eggs. How many eggs are in 4 boxes?\nA:",
    "The sun was shining and the birds",
    "Q: Ann reads 15 pages a day. How many pages does she read in 3 days?\nA:",
    "Sara wanted to bake a cake for her mom.",
]


def request_headers(api_key=None):
    """A JSON POST's headers, with `Authorization: Bearer KEY` when the server wants a key."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def one_request(url, body, api_key=None):
    """Streams one completion; returns (seconds, seconds to the first chunk, completion tokens, text, drafted
    tokens as llama-server's timings or klspec's `speculative` report them, or None)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", json.dumps(body), request_headers(api_key))
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read().decode(errors='replace')}")
    first_chunk, tokens, done, finish_reason, text, drafted = None, 0, False, None, "", None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if first_chunk is None:
            first_chunk = time.perf_counter() - start
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
            break
        chunk = json.loads(payload)
        for choice in chunk["choices"]:  # none in the usage chunk of stream_options.include_usage
            text += choice["text"]
            finish_reason = choice["finish_reason"] or finish_reason
        if "usage" in chunk:
            tokens = chunk["usage"]["completion_tokens"]
        if "draft_n" in chunk.get("timings", {}):
            drafted = chunk["timings"]["draft_n"]
        if "drafted" in chunk.get("speculative", {}):  # klspec's, in its last chunk with choices
            drafted = chunk["speculative"]["drafted"]
    connection.close()
    if not done or finish_reason is None:
        raise RuntimeError("the stream ended without a finish reason and [DONE]")
    return time.perf_counter() - start, first_chunk, tokens, text, drafted


# The default pair, 8 slots of 512 tokens (covering the pair's trained context of 448), one thread each. Without
# --spec-type draft-simple llama-server decodes target-only, as the first comparison here did by mistake; the
# run now fails when llama-server reports no drafted tokens.
LLAMA_SERVER_ARGS = llama_server_args(parallel=8, ctx_per_slot=512, threads=1)


def without_draft(server_args):
    """llama-server's flags less its draft model and speculation settings."""
    words, kept = shlex.split(server_args), []
    draft_flags = {"-md", "--model-draft", "--spec-type", "--spec-draft-n-max", "-td", "--threads-draft"}
    i = 0
    while i < len(words):
        if words[i] in draft_flags:
            i += 2
            continue
        kept.append(words[i])
        i += 1
    return shlex.join(kept)


class LlamaServer(Server):
    """llama.cpp's llama-server on a free loopback port, for as long as the `with` block runs."""

    def __init__(self, binary, args, api_key=None):
        super().__init__([binary] + shlex.split(args) + (["--api-key", api_key] if api_key else []), "llama-server")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def cli_generate(cli, prompt, args):
    """What `klspec generate --json` answers for the prompt, with the requests' options."""
    command = shlex.split(cli) + ["-p", prompt, "-n", str(args.max_tokens), "--json"]
    if args.judge:
        command += ["--judge", args.judge]
    if args.judge_threshold is not None:
        command += ["--judge-threshold", str(args.judge_threshold)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"serve_load: {shlex.join(command)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


class Load:
    """Requests from `concurrency` clients: `requests` in all, or as many as fit in `duration` seconds."""

    def __init__(self, args, expected, url=None):
        self.args, self.expected = args, expected
        self.url = url or args.url
        self.results, self.failures = [], []

    def body(self, i):
        # temperature 0 is klspec's default; llama-server samples unless told. Its final chunk carries
        # usage only with include_usage (then both servers send a last chunk with usage and no choices).
        prompts = self.args.prompts
        request = {"prompt": prompts[i % len(prompts)], "max_tokens": self.args.max_tokens, "stream": True,
                   "temperature": 0, "stream_options": {"include_usage": True}}
        if self.args.no_cache_prompt:  # both servers cache prompts by default; a repeated prompt then skips its prefill
            request["cache_prompt"] = False
        if self.args.judge:
            request["judge"] = self.args.judge
        if self.args.judge_threshold is not None:
            request["judge_threshold"] = self.args.judge_threshold
        return request

    def send(self, i):
        body = self.body(i)
        try:
            seconds, first_chunk, tokens, text, drafted = one_request(self.url, body, self.args.api_key)
        except (OSError, RuntimeError, ValueError) as error:
            self.failures.append(f"{body['prompt']!r}: {error}")
            return
        if self.expected is not None and text != self.expected[body["prompt"]]:
            self.failures.append(f"{body['prompt']!r}: got {text!r}, the CLI printed {self.expected[body['prompt']]!r}")
        self.results.append((seconds, first_chunk, tokens, drafted or 0))

    def client(self, first, step, deadline):
        """One client's requests one after another: i = first, first + step, ... until the deadline."""
        i = first
        while time.perf_counter() < deadline:
            self.send(i)
            i += step

    def run(self, concurrency, duration=None):
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            if duration is None:
                list(pool.map(self.send, range(self.args.requests)))
            else:
                deadline = start + duration
                list(pool.map(lambda c: self.client(c, concurrency, deadline), range(concurrency)))
        wall = time.perf_counter() - start
        if not self.results:
            sys.exit(f"serve_load: every request failed: {self.failures[:3]}")
        latencies = [r[0] for r in self.results]
        first_chunks = [r[1] for r in self.results]
        tokens = sum(r[2] for r in self.results)
        return {
            "requests": len(self.results), "failed": len(self.failures), "concurrency": concurrency,
            "wall_seconds": wall, "requests_per_second": len(self.results) / wall, "tokens": tokens,
            "tokens_per_second": tokens / wall,
            "latency_p50": statistics.median(latencies), "latency_p99": percentile(latencies, 99),
            "first_chunk_p50": statistics.median(first_chunks), "first_chunk_p99": percentile(first_chunks, 99),
            "drafted": sum(r[3] for r in self.results),
        }


def single_request_speed(args, expected_run):
    """One request alone, through the server and in the CLI: tokens/s of each (median of 5), the CLI's
    timed from its prompt to its last token (model loading left out), the server's as the client sees it."""
    prompt = args.prompts[0]
    server, cli = [], []
    for _ in range(5):
        seconds, _, tokens, _, _ = one_request(args.url, Load(args, None).body(0), args.api_key)
        server.append(tokens / seconds)
        stats = expected_run(prompt)["stats"]
        cli.append(stats["emitted"] / (stats["seconds"]["prompt"] + stats["seconds"]["decode"]))
    return {"prompt": prompt, "server_tokens_per_second": statistics.median(server),
            "cli_tokens_per_second": statistics.median(cli),
            "ratio": statistics.median(server) / statistics.median(cli)}


def engine_speed(args):
    """The engine's own figures on the same prompts, without HTTP: `klspec bench` (--engine) over every prompt
    8 times at -np 1 and at -np C; throughput is all emitted tokens over the run's wall time."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as dataset:
        for i in range(8):
            for j, prompt in enumerate(args.prompts):
                dataset.write(json.dumps({"id": f"{i}-{j}", "question": prompt}) + "\n")
        dataset.flush()
        figures = {}
        for parallel in sorted({1, args.concurrency}):
            command = shlex.split(args.engine) + ["--dataset", dataset.name, "-n", str(args.max_tokens),
                                                  "-np", str(parallel), "--json"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"serve_load: {shlex.join(command)} failed: {done.stderr.strip().splitlines()[-1:]}")
            figures[f"np{parallel}_tokens_per_second"] = json.loads(done.stdout)["throughput_tokens_per_second"]
    return figures


def read_prompts(path, limit):
    """The first `limit` prompts of a JSON-lines file: each line's "prompt", else its "question"."""
    prompts = []
    try:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if len(prompts) == limit:
                    break
                if not line.strip():
                    continue
                record = json.loads(line)
                prompt = record.get("prompt", record.get("question")) if isinstance(record, dict) else None
                if not isinstance(prompt, str) or not prompt:
                    sys.exit(f"serve_load: {path}:{number}: no \"prompt\" or \"question\" string")
                prompts.append(prompt)
    except (OSError, ValueError) as error:
        sys.exit(f"serve_load: {path}: {error}")
    if not prompts:
        sys.exit(f"serve_load: {path}: no prompts")
    return prompts


def print_load(title, summary):
    print(f"{title}: {summary['requests']} requests, {summary['concurrency']} concurrent streams, "
          f"{summary['wall_seconds']:.2f} s: {summary['requests_per_second']:.2f} requests/s, "
          f"{summary['tokens_per_second']:.1f} tokens/s ({summary['tokens']} tokens)")
    print(f"  latency p50 {summary['latency_p50']:.3f} s, p99 {summary['latency_p99']:.3f} s; "
          f"first chunk p50 {summary['first_chunk_p50']:.3f} s, p99 {summary['first_chunk_p99']:.3f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the server (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8, help="streams open at once (default %(default)s)")
    parser.add_argument("--requests", type=int, default=32, help="completions in all (default %(default)s)")
    parser.add_argument("--duration", type=float, default=None,
                        help="send for this many seconds instead of --requests, then measure the speed goals")
    parser.add_argument("--prompts", default=None,
                        help="JSON lines with a \"prompt\" or \"question\" field: send these instead of the built-in eight")
    parser.add_argument("--limit", type=int, default=16, help="how many of --prompts (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=96, help="max_tokens of each (default %(default)s)")
    parser.add_argument("--no-cache-prompt", action="store_true",
                        help="send cache_prompt: false, so every request prefills its whole prompt on either server")
    parser.add_argument("--judge", default=None, help="per-request judge (default: the server's)")
    parser.add_argument("--judge-threshold", type=float, default=None, help="its threshold, if it takes one")
    parser.add_argument("--cli", default=None,
                        help="`klspec generate` with the server's models and options: check every answer against it")
    parser.add_argument("--llama-server", default=None,
                        help="llama.cpp's llama-server binary: run the same workload against it too, side by side")
    parser.add_argument("--llama-server-args", default=LLAMA_SERVER_ARGS,
                        help="its models and flags (default: %(default)s)")
    parser.add_argument("--llama-server-target-only", action="store_true",
                        help="also run llama-server without its draft (the same flags less -md, --spec-type, "
                             "--spec-draft-n-max and -td): speculation must never fall below plain batching")
    parser.add_argument("--engine", default=None,
                        help="`klspec bench` with the server's models and options, e.g. \"build/klspec bench -t 1\": "
                             "the engine's own tokens/s on the same prompts at -np 1 and -np C, for comparison")
    parser.add_argument("--api-key", default=None,
                        help="send `Authorization: Bearer KEY` with every request (and start llama-server with --api-key KEY)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.limit < 1:
        parser.error("--limit must be at least 1")
    args.prompts = read_prompts(args.prompts, args.limit) if args.prompts else PROMPTS
    if args.duration is not None and not args.cli:
        parser.error("--duration needs --cli (the single-request comparison runs it)")

    expected_run = lambda prompt: cli_generate(args.cli, prompt, args)  # noqa: E731
    expected = {prompt: expected_run(prompt)["text"] for prompt in args.prompts} if args.cli else None
    load = Load(args, expected)
    summary = {"load": load.run(args.concurrency, args.duration)}
    failures = list(load.failures)
    if args.duration is not None:
        single = Load(args, expected)
        summary["one_client"] = single.run(1, args.duration)
        failures += single.failures
        summary["speedup_vs_one_client"] = summary["load"]["tokens_per_second"] / summary["one_client"]["tokens_per_second"]
        summary["single_request"] = single_request_speed(args, expected_run)
    if args.llama_server:
        with LlamaServer(args.llama_server, args.llama_server_args, args.api_key) as server:
            reference = Load(args, None, server.url)
            summary["llama_server"] = reference.run(args.concurrency, args.duration)
            summary["llama_server"]["command"] = shlex.join(server.command)
            if args.duration is not None:
                alone = Load(args, None, server.url)
                summary["llama_server_one_client"] = alone.run(1, args.duration)
                reference.failures += alone.failures
        failures += [f"llama-server: {failure}" for failure in reference.failures]
        if "-md" in shlex.split(args.llama_server_args) and summary["llama_server"]["drafted"] == 0:
            failures.append("llama-server drafted no tokens: it decoded target-only (is --spec-type draft-simple set?)")
    if args.llama_server and args.llama_server_target_only:
        with LlamaServer(args.llama_server, without_draft(args.llama_server_args), args.api_key) as server:
            for key, clients in (("llama_server_target_only", args.concurrency), ("llama_server_target_only_one_client", 1)):
                if clients == 1 and args.duration is None:
                    continue
                plain = Load(args, None, server.url)
                summary[key] = plain.run(clients, args.duration)
                summary[key]["command"] = shlex.join(server.command)
                failures += [f"llama-server target-only: {failure}" for failure in plain.failures]
    if args.engine:
        summary["engine"] = engine_speed(args)
    summary["checked_against_cli"] = bool(args.cli)
    summary["failures"] = failures[:10]

    if args.json:
        print(json.dumps(summary))
    else:
        print_load("load", summary["load"])
        if args.duration is not None:
            print_load("one client", summary["one_client"])
            single = summary["single_request"]
            print(f"{args.concurrency} clients / 1 client tokens/s: {summary['speedup_vs_one_client']:.2f}x; "
                  f"one request: server {single['server_tokens_per_second']:.1f} tokens/s, CLI "
                  f"{single['cli_tokens_per_second']:.1f} tokens/s ({single['ratio']:.2f}x)")
        if args.llama_server:
            print_load("llama-server", summary["llama_server"])
            if args.duration is not None:
                print_load("llama-server, one client", summary["llama_server_one_client"])
        for key, title in (("llama_server_target_only", "llama-server, target-only"),
                           ("llama_server_target_only_one_client", "llama-server, target-only, one client")):
            if key in summary:
                print_load(title, summary[key])
        if args.engine:
            print("engine (klspec bench, same prompts): " + ", ".join(
                f"{key.split('_')[0]} {value:.1f} tokens/s" for key, value in summary["engine"].items()))
        checked = "every answer complete and equal to the CLI's" if args.cli else "every answer complete"
        print(f"{len(failures)} failed" + (": " + "; ".join(failures[:3]) if failures else f" ({checked})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
