#!/usr/bin/python3
"""The automatic γ in a fresh decoder: one `klspec generate` per prompt, as a user's command line (or a server's
first request) runs it, with no earlier answers to learn the pair's acceptance from. `klspec bench` shares one
decoder over all its problems, so the speed report (docs/speed.md) does not show what a fresh one does.

  /usr/bin/python3 bench/speed/fresh_decoder.py [--klspec build/klspec] [--baseline OTHER_BUILD] [--limit 10]
      [--threads 1,2] [--rounds 2] [-n 256] [--models TARGET,DRAFT]

On the default pair (models/testbed-*.gguf) and the first --limit word problems of data/testbed_word_test.jsonl:
target-only (--draft-policy off), fixed γ 8 and the automatic γ (the default), and with --baseline the automatic γ
of another build, each prompt a fresh process; --rounds interleaved passes, odd ones in reverse order. Prints,
per thread count, decode tokens/s (emitted over decode time, summed over the prompts; the median over passes),
its ratio to target-only (the median of the per-pass ratios), MAT, and how many prompts drafted at all.
Prints a Markdown table with the machine (lscpu) above it.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common
from bench_common import DEFAULT_KLSPEC, ROOT, TESTBED_DRAFT, TESTBED_TARGET, cpu_header, klspec_generate  # noqa: E402


def settings(args):
    rows = [("target-only", args.klspec, ["--draft-policy", "off"]),
            ("fixed γ 8", args.klspec, ["--draft-policy", "fixed", "--draft-max", "8"]),
            ("auto", args.klspec, [])]
    if args.baseline:
        rows.append((f"auto, {Path(args.baseline).name}", args.baseline, []))
    return rows


def decode_pass(klspec, target, draft, prompts, threads, n, flags):
    """Sums over the prompts of one setting: emitted tokens, decode seconds, target calls, prompts that drafted."""
    emitted = seconds = calls = drafted_prompts = 0
    for prompt in prompts:
        out = klspec_generate(klspec, target, prompt, ["-md", draft, "-n", n, "-t", threads, *flags])["stats"]
        emitted += out["emitted"]
        seconds += out["seconds"]["decode"]
        calls += out["target_calls"]
        drafted_prompts += out["drafted"] > 0
    return {"emitted": emitted, "seconds": seconds, "calls": calls, "drafted_prompts": drafted_prompts}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--klspec", default=str(DEFAULT_KLSPEC))
    parser.add_argument("--baseline", help="another klspec build whose automatic γ runs beside")
    parser.add_argument("--models", default=f"{TESTBED_TARGET},{TESTBED_DRAFT}", help="TARGET,DRAFT")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("-n", default="256")
    args = parser.parse_args()
    target, draft = args.models.split(",")
    with open(ROOT / "data/testbed_word_test.jsonl") as f:
        prompts = [json.loads(line)["question"] for line in f][: args.limit]
    print("\n".join(cpu_header()))
    print(f"\n{len(prompts)} word problems, one `klspec generate -n {args.n}` process each, {args.rounds} "
          f"interleaved passes\n")
    print("| -t | setting | decode tok/s | × target-only | MAT | prompts that drafted |")
    print("|---:|---|---:|---:|---:|---:|")
    rows = settings(args)
    for threads in args.threads.split(","):
        passes = {name: [] for name, _, _ in rows}
        for round_index in range(args.rounds):
            order = rows if round_index % 2 == 0 else list(reversed(rows))
            for name, klspec, flags in order:
                passes[name].append(decode_pass(klspec, target, draft, prompts, threads, args.n, flags))
                print(f"  pass {round_index}, -t {threads}: {name} done", file=sys.stderr, flush=True)
        rate = {name: [p["emitted"] / p["seconds"] for p in runs] for name, runs in passes.items()}
        for name, runs in passes.items():
            ratio = statistics.median(r / t for r, t in zip(rate[name], rate["target-only"]))
            mat = sum(p["emitted"] for p in runs) / sum(p["calls"] for p in runs)
            drafted = "/".join(str(p["drafted_prompts"]) for p in runs)
            print(f"| {threads} | {name} | {statistics.median(rate[name]):.1f} | {ratio:.2f}× | {mat:.2f} | "
                  f"{drafted} of {len(prompts)} |")


if __name__ == "__main__":
    main()
