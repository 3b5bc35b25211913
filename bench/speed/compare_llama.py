#!/usr/bin/env python3
"""klspec against llama.cpp's own programs from the same pinned build, on the same models and prompts.

Speculative: `klspec generate -md` vs `llama-speculative-simple --spec-type draft-simple`, greedy, same gamma.
Target-only: `klspec generate` vs `llama-simple`. Runs are interleaved (klspec, llama.cpp, klspec, ...)
so that machine noise hits both alike; the report is the ratio of median decode tokens/s.
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import (DEFAULT_DRAFT_Q4, DEFAULT_DRAFT_Q8, DEFAULT_KLSPEC, DEFAULT_TARGET, STORY_PROMPTS,  # noqa: E402
                          klspec_generate, llama_speculative_simple, run)

LLAMA_EVAL = re.compile(r"eval time =\s+([\d.]+) ms /\s+(\d+) runs")


# llama-simple has no thread flag: it runs ggml's default GGML_DEFAULT_N_THREADS = 4, so klspec does too there.
LLAMA_SIMPLE_THREADS = 4


def klspec_run(args, prompt, draft, threads):
    extra = ["-n", args.n, "-t", threads, "--draft-max", args.gamma] + (["-md", draft] if draft else [])
    stats = klspec_generate(args.klspec, args.target, prompt, extra)["stats"]
    return stats["tokens_per_second"], stats["acceptance_rate"]


def llama_speculative_run(args, prompt, draft):
    tokens, seconds, acceptance = llama_speculative_simple(args.llama_bin, args.target, draft, prompt, args.gamma,
                                                           args.threads, args.n)
    return tokens / seconds, acceptance


def llama_simple_run(args, prompt):
    done = run([args.llama_bin / "llama-simple", "-m", args.target, "-n", args.n, prompt])
    err = done.stdout + done.stderr
    ms, runs = LLAMA_EVAL.search(err).groups()
    return int(runs) / (float(ms) / 1000), None


def compare(name, ours, theirs, args):
    ours_tps, theirs_tps, ours_acc, theirs_acc = [], [], [], []
    for _ in range(args.repeats):
        for prompt in STORY_PROMPTS:
            tps, acc = ours(prompt)
            ours_tps.append(tps)
            ours_acc.append(acc)
            tps, acc = theirs(prompt)
            theirs_tps.append(tps)
            theirs_acc.append(acc)
    row = {"case": name, "klspec_tps": statistics.median(ours_tps), "llama_tps": statistics.median(theirs_tps)}
    row["ratio"] = row["klspec_tps"] / row["llama_tps"]
    if theirs_acc[0] is not None:
        row["klspec_acceptance"] = statistics.mean(ours_acc)
        row["llama_acceptance"] = statistics.mean(theirs_acc)
    print(json.dumps(row), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", type=Path, default=DEFAULT_KLSPEC)
    parser.add_argument("--llama-bin", type=Path, required=True, help="bin/ of the pinned llama.cpp install")
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET)
    parser.add_argument("--drafts", type=Path, nargs="+", default=[DEFAULT_DRAFT_Q8, DEFAULT_DRAFT_Q4])
    parser.add_argument("-n", type=int, default=128, help="tokens per generation")
    parser.add_argument("--gamma", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="passes over the prompts")
    args = parser.parse_args()

    for draft in args.drafts:
        compare(f"speculative {draft.name} gamma={args.gamma}",
                lambda p, d=draft: klspec_run(args, p, d, args.threads), lambda p, d=draft: llama_speculative_run(args, p, d), args)
    compare("target-only", lambda p: klspec_run(args, p, None, LLAMA_SIMPLE_THREADS), lambda p: llama_simple_run(args, p), args)


if __name__ == "__main__":
    main()
