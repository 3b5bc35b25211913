"""Pool sweeps of one pair over several benchmarks (HumanEval and MBPP+ for the real pair's KL bar, issue 59):
for each point every summary has, pass@1 over all their problems, its paired change against vanilla with a 95 %
interval, and MAT against vanilla's, then whether the bar holds (MAT >= --mat-ratio x vanilla's, change >=
-(--max-drop) points, the interval's lower end >= --min-low points).

  /usr/bin/python3 bench/model_pairs/pooled_sweeps.py SWEEP_DIR/summary.json SWEEP_DIR/summary.json [--json]

Reads the summary.json that `klspec sweep` (or `--summary-only --rescore`) writes. Each benchmark's interval is
the normal approximation mean ± 1.96 s/sqrt(n) over its per-problem differences (src/core/accuracy_loss.h); the
pooled change weights each by its problems, and its standard error adds theirs as independent strata:
se = sqrt(sum n_k^2 se_k^2) / N.
"""
import argparse
import json
import math
import sys

Z = 1.96


def pool(summaries):
    """Rows of the points every summary holds, in the first summary's order: point, problems, correct, change,
    change_low, change_high (fractions), mat, mat_ratio (against vanilla's pooled MAT)."""
    by_point = [{p["point"]: p for p in s["points"]} for s in summaries]
    common = [name for name in by_point[0] if all(name in points for points in by_point)]
    if "vanilla" not in common:
        raise ValueError("every summary needs a vanilla point, the reference")
    vanilla_mat = sum(p["vanilla"]["emitted"] for p in by_point) / sum(p["vanilla"]["target_calls"] for p in by_point)
    rows = []
    for name in common:
        points = [p[name] for p in by_point]
        if any(p["examples"] != q["vanilla"]["examples"] for p, q in zip(points, by_point)):
            raise ValueError(f"{name}: not over the same problems as vanilla in every summary")
        n = sum(p["examples"] for p in points)
        change = sum(p["examples"] * p["accuracy_change"] for p in points) / n
        se = math.sqrt(sum((p["examples"] * (p["accuracy_change_high"] - p["accuracy_change_low"]) / (2 * Z)) ** 2
                           for p in points)) / n
        mat = sum(p["emitted"] for p in points) / sum(p["target_calls"] for p in points)
        rows.append({"point": name, "problems": n, "correct": sum(p["correct"] for p in points), "change": change,
                     "change_low": change - Z * se, "change_high": change + Z * se, "mat": mat,
                     "mat_ratio": mat / vanilla_mat})
    return rows


def meets_bar(row, mat_ratio, max_drop, min_low):
    return (row["point"] != "vanilla" and row["mat_ratio"] >= mat_ratio and 100 * row["change"] >= -max_drop
            and 100 * row["change_low"] >= min_low)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("summaries", nargs="+", help="summary.json of each sweep")
    parser.add_argument("--mat-ratio", type=float, default=1.15, help="MAT at least this times vanilla's (1.15)")
    parser.add_argument("--max-drop", type=float, default=1.0, help="pass@1 at most this many points below (1)")
    parser.add_argument("--min-low", type=float, default=-3.0, help="the interval's lower end at least this (-3)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    try:
        summaries = [json.load(open(path)) for path in args.summaries]
        rows = pool(summaries)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"pooled_sweeps.py: {error}")
    for row in rows:
        row["meets_bar"] = meets_bar(row, args.mat_ratio, args.max_drop, args.min_low)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"| point | problems | pass@1 | Δ against vanilla [95 % CI] | MAT | × vanilla's MAT | bar |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        change = "—" if r["point"] == "vanilla" else \
            f"{100 * r['change']:+.1f} [{100 * r['change_low']:+.1f}, {100 * r['change_high']:+.1f}]"
        bar = "—" if r["point"] == "vanilla" else ("met" if r["meets_bar"] else "not met")
        print(f"| {r['point']} | {r['problems']} | {r['correct']} ({100 * r['correct'] / r['problems']:.1f} %) | "
              f"{change} | {r['mat']:.2f} | {r['mat_ratio']:.2f}× | {bar} |")


if __name__ == "__main__":
    main()
