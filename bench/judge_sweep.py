#!/usr/bin/env python3
"""MAT and acceptance of each judge rule over a threshold sweep (DESIGN.md, "Metrics").

Runs `klspec generate --json` for every prompt and rule setting and sums the counters over prompts:
MAT = emitted / target calls, acceptance = accepted / drafted, relaxed = accepted only because the
rule relaxed them, judge share = judge time / decode time.
"""
import argparse
import json
from pathlib import Path

from bench_common import DEFAULT_DRAFT_Q4, DEFAULT_KLSPEC, DEFAULT_TARGET, STORY_PROMPTS, judge_args, klspec_generate

DEFAULT_SETTINGS = (["vanilla"] + [f"kl:{tau}" for tau in (0.1, 0.3, 0.5, 1, 2)] + [f"topk:{k}" for k in (2, 4, 8)])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", type=Path, default=DEFAULT_KLSPEC)
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET)
    parser.add_argument("--draft", type=Path, default=DEFAULT_DRAFT_Q4)
    parser.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS,
                        help="RULE or RULE:VALUE (the threshold, or K for topk); default: %(default)s")
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("--gamma", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    print("| rule | MAT | acceptance | relaxed | judge share of decode time |")
    print("|---|---|---|---|---|")
    for setting in args.settings:
        totals = dict.fromkeys(["emitted", "target_calls", "drafted", "accepted", "relaxed_accepted"], 0)
        judge_seconds = decode_seconds = 0.0
        for prompt in STORY_PROMPTS:
            extra = ["-md", args.draft, "-n", args.n, "--draft-max", args.gamma, "-t", args.threads, *judge_args(setting)[0]]
            stats = klspec_generate(args.klspec, args.target, prompt, extra)["stats"]
            for key in totals:
                totals[key] += stats[key]
            judge_seconds += stats["seconds"]["judge"]
            decode_seconds += stats["seconds"]["decode"]
        print(f"| {setting} | {totals['emitted'] / totals['target_calls']:.2f} "
              f"| {totals['accepted'] / totals['drafted']:.3f} | {totals['relaxed_accepted']} "
              f"| {100 * judge_seconds / decode_seconds:.2f} % |", flush=True)


if __name__ == "__main__":
    main()
