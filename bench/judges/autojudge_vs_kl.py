#!/usr/bin/env python3
"""AutoJudge against KL on one dataset (issue 9): accuracy, MAT, acceptance and speed per setting.

Runs `klspec bench --json` once per setting on the same problems and models and prints a Markdown table.
Settings: vanilla, kl:TAU (confidence mask 0.9, docs/design.md "The verification rules"), kl-nomask:TAU,
autojudge:TAU (needs --head; `autojudge:q0.6` takes the head file's threshold candidate at validation
quantile 0.6), topk:K, topn-delta:N/DELTA, and RULE:THRESHOLD for the other rules (target-entropy,
prob-threshold, typical, ...).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import DEFAULT_KLSPEC, judge_args  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--klspec", type=Path, default=DEFAULT_KLSPEC)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--head", help="AutoJudge head file (klspec train-judge --out)")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--gamma", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model-args", default="", help="extra flags, e.g. '-m T.gguf -md D.gguf'")
    ap.add_argument("--settings", nargs="+", required=True)
    ap.add_argument("--json-out", help="also write every run's JSON here (one line per setting)")
    args = ap.parse_args()

    print(f"dataset {args.dataset}, first {args.limit} problems, greedy, gamma {args.gamma}, {args.threads} thread(s)\n")
    print("| rule | threshold | accuracy | MAT | acceptance | relaxed accepted | tokens/s (decode) |")
    print("|---|---|---|---|---|---|---|")
    out = open(args.json_out, "w") if args.json_out else None
    for setting in args.settings:
        extra, rule, value = judge_args(setting, args.head)
        cmd = [str(args.klspec), "bench", "--dataset", args.dataset, "--limit", str(args.limit), "--draft-max",
               str(args.gamma), "-t", str(args.threads), "-n", "256", "--json", *args.model_args.split(), *extra]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        s = r["stats"]
        print(f'| {rule} | {value} | {100 * r["accuracy"]["rate"]:.1f} % | {s["mat"]:.2f} | '
              f'{100 * s["acceptance_rate"]:.1f} % | {s["relaxed_accepted"]} | {s["tokens_per_second"]:.0f} |', flush=True)
        if out:
            out.write(json.dumps({"setting": setting, "threshold": value, **r}) + "\n")


if __name__ == "__main__":
    main()
