#!/usr/bin/python3
"""Summarise a `klspec bench --cost-trace FILE` (one JSON line per step) as a Markdown table: for each draft
length γ the steps drafted, the cost model's predicted step time and tokens against the measured ones
(docs/cost-model.md).

    python3 bench/speed/cost_trace_report.py TRACE.jsonl [TRACE2.jsonl ...]

Only steps the cost model chose (lines with predicted_ms) are grouped; a step of several sequences is
grouped by its longest draft. Measured time is the step's target plus draft llama_decode time.
"""
import collections
import json
import sys


def summarise(path):
    groups = collections.defaultdict(list)
    steps = unpredicted = 0
    with open(path) as f:
        for line in f:
            step = json.loads(line)
            steps += 1
            if step["predicted_ms"] is None:
                unpredicted += 1
                continue
            groups[max(step["lengths"])].append(step)
    print(f"`{path}`: {steps} steps, {unpredicted} without a prediction (not under auto, or nothing left to draft)\n")
    print("| γ | steps | predicted ms | measured ms | measured ÷ predicted | predicted tokens | emitted | "
          "emitted ÷ predicted | predicted ms without drafts |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = collections.Counter()
    for gamma in sorted(groups):
        rows = groups[gamma]
        sums = {key: sum(r[key] for r in rows) for key in ("predicted_ms", "predicted_tokens", "emitted", "target_only_ms")}
        sums["measured_ms"] = sum(r["verify_ms"] + r["draft_ms"] for r in rows)
        totals.update(sums)
        totals["steps"] += len(rows)
        n = len(rows)
        print(f"| {gamma} | {n} | {sums['predicted_ms'] / n:.1f} | {sums['measured_ms'] / n:.1f} | "
              f"{sums['measured_ms'] / sums['predicted_ms']:.2f} | {sums['predicted_tokens'] / n:.2f} | "
              f"{sums['emitted'] / n:.2f} | {sums['emitted'] / sums['predicted_tokens']:.2f} | {sums['target_only_ms'] / n:.1f} |")
    if totals["steps"]:
        print(f"| all | {totals['steps']} | {totals['predicted_ms'] / 1e3:.1f} s | {totals['measured_ms'] / 1e3:.1f} s | "
              f"{totals['measured_ms'] / totals['predicted_ms']:.2f} | {totals['predicted_tokens']:.0f} | "
              f"{totals['emitted']:.0f} | {totals['emitted'] / totals['predicted_tokens']:.2f} | |")
    print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for trace in sys.argv[1:]:
        summarise(trace)
