#!/usr/bin/python3
"""Running streams while a long prompt arrives (issue 82, item 3: chunked prefill), on the real pair.

  /usr/bin/python3 bench/serving/long_prompt_gaps.py [--passes 2] [--prompt-tokens 2000] [--klspec build/klspec]
      [--prefill-chunks 128,0] [--json]

Three streaming clients decode code (greedy, 192 tokens each) on a 4-slot server; two seconds in, a fourth sends a
prompt of about --prompt-tokens tokens (HumanEval's problems, one after another) for 16 tokens. The table gives,
per server and pass, the longest wait between two chunks of a running stream while that prompt is prefilled (from
its send to its first chunk), the running streams' chunks in that window, and the long prompt's time to its first
chunk. Servers, each with `-np 4 -t 2` and 4,096 tokens a slot, started alike, passes interleaved (the second in
reverse order):
  * klspec serve with the draft at its defaults, at each --prefill-chunks value (128, the default: chunked prefill,
    128 prompt tokens a step; 0: each prompt prefilled whole, the others waiting);
  * llama-server without a draft (the pinned build; its -b 2048 puts the whole prompt in one batch).
"""
import argparse
import gzip
import http.client
import json
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "lib"))
from bench_common import Server, cpu_header, fetch_real_model, pinned_llama_server  # noqa: E402

STREAM_PROMPTS = ["# utils.py: small helpers for parsing and formatting dates\nimport datetime\n\n",
                  "# geometry.py: points, vectors and polygons\nimport math\n\n",
                  "# text.py: helpers for cleaning and tokenizing text\nimport re\n\n"]


def long_prompt(chars):
    """HumanEval's problem statements, one after another, until about `chars` characters."""
    with gzip.open(ROOT.parent / "shared/datasets/humaneval/HumanEval.jsonl.gz", "rt") as rows:
        text = ""
        for row in map(json.loads, rows):
            text += row["prompt"] + "    pass\n\n"
            if len(text) >= chars:
                return text + "# Now write the first function again, fully implemented:\n"
    return text


def stream(url, prompt, max_tokens, out):
    """One streaming completion; appends to `out` each chunk's arrival time (perf_counter) and its usage."""
    parts = url.split(":")
    connection = http.client.HTTPConnection(parts[1].strip("/"), int(parts[2]), timeout=600)
    body = {"prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0,
            "stream_options": {"include_usage": True}}
    out["sent"] = time.perf_counter()
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]}")
    out["chunks"] = []
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: "):])
        if any(choice.get("text") for choice in chunk.get("choices", [])):
            out["chunks"].append(time.perf_counter())
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
    connection.close()


def measure(url, prompt, args):
    streams = [{} for _ in STREAM_PROMPTS]
    threads = [threading.Thread(target=stream, args=(url, p, args.stream_tokens, s)) for p, s in
               zip(STREAM_PROMPTS, streams)]
    for thread in threads:
        thread.start()
    time.sleep(args.delay)
    arriving = {}
    stream(url, prompt, 16, arriving)
    for thread in threads:
        thread.join()
    window = (arriving["sent"], arriving["chunks"][0])
    gaps, inside = [], 0
    for s in streams:
        times = [window[0]] + [t for t in s["chunks"] if window[0] < t <= window[1]]
        inside += len(times) - 1
        later = [t for t in s["chunks"] if t > window[1]]
        if later:  # the wait that spans the window's end counts too
            times.append(later[0])
        gaps.append(max(b - a for a, b in zip(times, times[1:])) if len(times) > 1 else window[1] - window[0])
    return {"max_gap_s": max(gaps), "stream_chunks_in_window": inside,
            "long_first_chunk_s": window[1] - window[0], "long_prompt_tokens": arriving["usage"]["prompt_tokens"],
            "stream_tokens": [s["usage"]["completion_tokens"] for s in streams]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", default=str(ROOT / "build/klspec"))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=2000, help="the arriving prompt's size, about")
    parser.add_argument("--stream-tokens", type=int, default=192, help="tokens each running stream asks for")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the streams run before the prompt comes")
    parser.add_argument("--prefill-chunks", default="128,0", help="klspec serve's --prefill-chunk values to run")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    llama_server = pinned_llama_server()
    if not llama_server:
        sys.exit("long_prompt_gaps: no llama-server under ~/.cache/klspec (bash scripts/build.sh builds it)")
    target, draft = fetch_real_model("qwen2.5-coder-1.5b"), fetch_real_model("qwen2.5-coder-0.5b")
    slots = ["-np", "4", "-t", "2"]
    commands = {f"klspec serve, draft, --prefill-chunk {chunk}": [args.klspec, "serve", "-m", target, "-md", draft,
                                                                  *slots, "-c", "4096", "--prefill-chunk", chunk]
                for chunk in args.prefill_chunks.split(",")}
    commands["llama-server, no draft"] = [llama_server, "-m", target, *slots, "-c", "16384", "--no-webui"]
    prompt = long_prompt(int(args.prompt_tokens * 3.3))  # HumanEval's text runs about 3.3 characters a token
    results = {name: [] for name in commands}
    for p in range(args.passes):
        for name in (list(commands) if p % 2 == 0 else list(reversed(commands))):
            with Server(commands[name], name, timeout=300) as server:
                results[name].append(measure(server.url, prompt, args))
            r = results[name][-1]
            print(f"pass {p}: {name}: longest gap {r['max_gap_s']:.2f} s, first chunk {r['long_first_chunk_s']:.2f} s",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(results))
        return
    print("\n".join(cpu_header()))
    tokens = results["llama-server, no draft"][0]["long_prompt_tokens"]
    print(f"\n3 running streams; a {tokens}-token prompt arrives {args.delay:g} s in (per pass)\n")
    print("| server | longest gap in a running stream, s | running streams' chunks meanwhile | "
          "long prompt's first chunk, s |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        def column(key, spec):
            return " / ".join(format(r[key], spec) for r in runs)
        print(f"| {name} | {column('max_gap_s', '.2f')} | {column('stream_chunks_in_window', 'd')} | "
              f"{column('long_first_chunk_s', '.2f')} |")


if __name__ == "__main__":
    main()
