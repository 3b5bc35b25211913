"""How often a sweep's answers survive the rule's relaxations: per point, the problems where the rule relaxed
at least once, and the share of those whose scored answer still equals vanilla's; and the same by how many
relaxations the problem had (1, 2-3, 4+). On a draft whose relaxations are real changes of the text, this
says why a rule cannot add much MAT and keep the answers (docs/real-model.md). With --pair A B: the
difference of the two points' agreement with vanilla over the problems both decoded, with its paired 95 %
interval (normal approximation of the per-problem differences), for rules compared at about equal MAT.
A second table and each pair's second line count only the problems where vanilla's output holds a scored
answer: an output cut at -n before its answer scores "", and two such outputs agree without saying anything
about the rule.

  /usr/bin/python3 bench/model_pairs/relaxation_survival.py SWEEP_DIR [SWEEP_DIR...] [--pair POINT_A POINT_B]...
"""
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from bench_common import wilson  # noqa: E402


def load(dirs):
    rows = defaultdict(dict)  # point -> id -> example
    for d in dirs:
        with open(f"{d}/examples.jsonl") as f:
            for line in f:
                e = json.loads(line)
                rows[e["point"]][e["id"]] = e
    return rows


def answered_agreement(examples, vanilla):
    """The problems vanilla answered, and how many of them keep vanilla's answer under the point."""
    answered = [i for i in examples if i in vanilla and vanilla[i]["prediction"]]
    return answered, sum(examples[i]["prediction"] == vanilla[i]["prediction"] for i in answered)


def answered_table(rows, vanilla):
    print("\n| point | vanilla answered | same answer there [95 % CI] | vanilla unanswered | still unanswered |")
    print("|---|---:|---:|---:|---:|")
    for point, examples in sorted(rows.items()):
        answered, same = answered_agreement(examples, vanilla)
        unanswered = [i for i in examples if i in vanilla and not vanilla[i]["prediction"]]
        kept = sum(not examples[i]["prediction"] for i in unanswered)
        low, high = wilson(same, len(answered))
        share = f"{100 * same / len(answered):.1f} % [{100 * low:.1f}, {100 * high:.1f}]" if answered else "—"
        print(f"| {point} | {len(answered)} | {share} | {len(unanswered)} | {kept} |")


def paired_difference(rows, vanilla, a, b, answered_only=False):
    for point in (a, b):
        if point not in rows:
            sys.exit(f"relaxation_survival: no point {point} (points: {', '.join(sorted(rows))})")
    ids = [i for i in rows[a] if i in rows[b] and i in vanilla and (vanilla[i]["prediction"] or not answered_only)]
    agree = lambda point, i: float(rows[point][i]["prediction"] == vanilla[i]["prediction"])
    diffs = [agree(a, i) - agree(b, i) for i in ids]
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n)
    print(f"{a} - {b}: {100 * mean:+.1f} points [{100 * (mean - half):+.1f}, {100 * (mean + half):+.1f}] "
          f"over {n} problems" + (" that vanilla answered" if answered_only else ""))


def main():
    args, pairs = [], []
    argv = sys.argv[1:]
    while argv:
        if argv[0] == "--pair" and len(argv) >= 3:
            pairs.append((argv[1], argv[2]))
            argv = argv[3:]
        else:
            args.append(argv.pop(0))
    if not args:
        sys.exit(__doc__)
    rows = load(args)
    vanilla = rows.pop("vanilla", None)
    if not vanilla:
        sys.exit("relaxation_survival: no vanilla point in " + " ".join(args))
    print("| point | problems | relaxed at least once | same answer there | 1 relaxation | 2-3 | 4+ |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for point, examples in sorted(rows.items()):
        ids = [i for i in examples if i in vanilla]
        bins = defaultdict(lambda: [0, 0])  # bin -> [same, all]
        for i in ids:
            n = examples[i]["relaxed"]
            if n == 0:
                continue
            same = examples[i]["prediction"] == vanilla[i]["prediction"]
            for b in ("any", "1" if n == 1 else "2-3" if n <= 3 else "4+"):
                bins[b][0] += same
                bins[b][1] += 1

        def share(b):
            same, total = bins[b]
            return f"{100 * same / total:.0f} % of {total}" if total else "—"
        print(f"| {point} | {len(ids)} | {bins['any'][1]} | {share('any')} | {share('1')} | {share('2-3')} | {share('4+')} |")
    answered_table(rows, vanilla)
    for a, b in pairs:
        paired_difference(rows, vanilla, a, b)
        paired_difference(rows, vanilla, a, b, answered_only=True)


if __name__ == "__main__":
    main()
