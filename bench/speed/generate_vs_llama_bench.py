#!/usr/bin/env python3
"""`klspec generate` target-only against llama-bench on the same file, threads and prompt length (issue 82's goal:
klspec's decode and prompt speed >= 0.95x llama-bench's tg and pp).

Each round runs, in turn:
  * `klspec generate -m TARGET -f PROMPT -n N -t T --json`: its prompt tokens/s and decode tokens/s;
  * llama-bench at its defaults (repacked, flash attention auto, F16 cache): `-p P -n 0` for pp and `-p 0 -n N -d P`
    for tg, P being the prompt's token count as klspec counted it, so that tg decodes after as many cached tokens as
    klspec's decoding does;
  * the same with klspec's attention settings (`-fa 1 -ctv bf16`: the V cache klspec keeps for exactness), which
    separates the cache's cost from klspec's own.
Rounds interleave the three (odd rounds in reverse order; an untimed klspec run first counts the prompt's tokens)
so that a slow spell of the machine falls on all; the report gives each column's
median and the median of the per-round ratios. The prompt: HumanEval's problems (--problems), joined.

  /usr/bin/python3 bench/speed/generate_vs_llama_bench.py [--rounds 5] [-n 128] [-t 2] [--problems 2,3] [--json]
"""
import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import (DEFAULT_KLSPEC, ROOT, checkout_commit, cpu_header, fetch_real_model,  # noqa: E402
                          klspec_generate)
from llama_bench_lib import default_llama_install, llama_bench  # noqa: E402

KLSPEC_CACHE_FLAGS = ["-fa", "1", "-ctv", "bf16"]


def humaneval_prompt(data_dir, problems):
    with gzip.open(Path(data_dir) / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    return "".join(rows[i]["prompt"] for i in problems)


def klspec_round(args, prompt):
    stats = klspec_generate(args.klspec, args.model, prompt, ["-n", args.n, "-t", args.threads])["stats"]
    return {"pp": stats["prompt_tokens_per_second"], "tg": stats["tokens_per_second"],
            "prompt_tokens": stats["prompt_tokens"], "emitted": stats["emitted"]}


def llama_bench_round(args, binary, prompt_tokens, extra):
    pp = llama_bench(binary, args.model, [prompt_tokens], [], args.threads, 1, extra=extra)[0]["avg_ts"]
    tg = llama_bench(binary, args.model, [], [args.n], args.threads, 1,
                     extra=[*extra, "-d", str(prompt_tokens)])[0]["avg_ts"]
    return {"pp": pp, "tg": tg}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", help="target GGUF (default: the real pair's target, fetched)")
    parser.add_argument("--klspec", default=str(DEFAULT_KLSPEC))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", type=int, default=128, help="tokens to decode")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--problems", default="2,3", help="HumanEval problems whose prompts, joined, are the prompt")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--json", action="store_true", help="print the rounds and medians as JSON")
    args = parser.parse_args()
    if args.rounds < 1 or args.n < 1 or args.threads < 1:
        parser.error("--rounds, -n and --threads must be at least 1")
    args.model = args.model or str(fetch_real_model("qwen2.5-coder-1.5b"))
    binary = default_llama_install() / "bin" / "llama-bench"
    problems = [int(p) for p in args.problems.split(",")]
    settings = {"klspec generate": None, "llama-bench": [], "llama-bench -fa 1 -ctv bf16": KLSPEC_CACHE_FLAGS}
    prompt = humaneval_prompt(args.data_dir, problems)
    prompt_tokens = klspec_round(args, prompt)["prompt_tokens"]  # llama-bench's prompt length, as klspec tokenizes it
    rounds = []
    for r in range(args.rounds):
        row = {}
        for name in (list(settings) if r % 2 == 0 else list(settings)[::-1]):  # odd rounds in reverse order
            extra = settings[name]
            row[name] = (klspec_round(args, prompt) if extra is None
                         else llama_bench_round(args, binary, prompt_tokens, extra))
        rounds.append({name: row[name] for name in settings})
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{name} pp {v['pp']:.2f} tg {v['tg']:.2f}" for name, v in row.items()), file=sys.stderr)
    median = {name: {k: statistics.median(row[name][k] for row in rounds) for k in ("pp", "tg")} for name in settings}
    ratios = {ref: {k: statistics.median(row["klspec generate"][k] / row[ref][k] for row in rounds) for k in ("pp", "tg")}
              for ref in settings if ref != "klspec generate"}
    if args.json:
        print(json.dumps({"cpu": cpu_header(), "klspec_commit": checkout_commit(), "rounds": rounds,
                          "median": median, "klspec_over": ratios}, indent=1))
        return
    print("\n".join(cpu_header()))
    print(f"\nklspec {checkout_commit()}; {args.model}; -t {args.threads}; prompt {prompt_tokens} tokens "
          f"(HumanEval {args.problems}), decode {args.n}; {args.rounds} interleaved rounds, medians\n")
    print("| run | prompt tok/s | decode tok/s | klspec's pp × | klspec's tg × |")
    print("|---|---:|---:|---:|---:|")
    for name in settings:
        versus = f"{ratios[name]['pp']:.2f} | {ratios[name]['tg']:.2f}" if name in ratios else "— | —"
        print(f"| {name} | {median[name]['pp']:.2f} | {median[name]['tg']:.2f} | {versus} |")
    print("\n(× : the median over rounds of klspec's speed over that run's in the same round)")


if __name__ == "__main__":
    main()
