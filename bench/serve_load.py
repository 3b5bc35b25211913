#!/usr/bin/env python3
"""Bounded load test of a running `klspec serve`: C concurrent streaming clients send N completions in
all; prints requests/s, generated tokens/s and latency percentiles (whole request and first chunk).

  klspec serve -np 4 &
  bench/serve_load.py --url http://127.0.0.1:8080 --concurrency 8 --requests 32 --max-tokens 96

Standard library only. Token counts are the server's own (usage in the final chunk)."""
import argparse
import concurrent.futures
import http.client
import json
import statistics
import sys
import time
import urllib.parse

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


def one_request(url, body):
    """Streams one completion; returns (seconds, seconds to the first chunk, completion tokens)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    start = time.perf_counter()
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read().decode(errors='replace')}")
    first_chunk, tokens, done = None, 0, False
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
        if "usage" in chunk:
            tokens = chunk["usage"]["completion_tokens"]
    connection.close()
    if not done:
        raise RuntimeError("the stream ended without [DONE]")
    return time.perf_counter() - start, first_chunk, tokens


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the server (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8, help="streams open at once (default %(default)s)")
    parser.add_argument("--requests", type=int, default=32, help="completions in all (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=96, help="max_tokens of each (default %(default)s)")
    parser.add_argument("--judge", default=None, help="per-request judge (default: the server's)")
    parser.add_argument("--judge-threshold", type=float, default=None, help="its threshold, if it takes one")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    def body(i):
        request = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": args.max_tokens, "stream": True}
        if args.judge:
            request["judge"] = args.judge
        if args.judge_threshold is not None:
            request["judge_threshold"] = args.judge_threshold
        return request

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(lambda i: one_request(args.url, body(i)), range(args.requests)))
    wall = time.perf_counter() - start
    latencies = [r[0] for r in results]
    first_chunks = [r[1] for r in results]
    tokens = sum(r[2] for r in results)
    summary = {
        "requests": args.requests, "concurrency": args.concurrency, "wall_seconds": wall,
        "requests_per_second": args.requests / wall, "tokens": tokens, "tokens_per_second": tokens / wall,
        "latency_p50": statistics.median(latencies), "latency_p99": percentile(latencies, 99),
        "first_chunk_p50": statistics.median(first_chunks), "first_chunk_p99": percentile(first_chunks, 99),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{args.requests} requests, {args.concurrency} concurrent streams, {wall:.2f} s: "
              f"{summary['requests_per_second']:.2f} requests/s, {summary['tokens_per_second']:.1f} tokens/s ({tokens} tokens)")
        print(f"latency p50 {summary['latency_p50']:.3f} s, p99 {summary['latency_p99']:.3f} s; "
              f"first chunk p50 {summary['first_chunk_p50']:.3f} s, p99 {summary['first_chunk_p99']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
