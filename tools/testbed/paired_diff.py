"""Accuracy change of each judge setting against vanilla on the same problems, with a 95 % interval for
the paired difference, from `klspec sweep`'s examples.jsonl:

  python3 tools/testbed/paired_diff.py OUT/examples.jsonl [...]

Every setting of a sweep runs on the same problems, so the change is paired: only the problems one setting
gets right and the other wrong (lost, gained) move it. Normal approximation of the difference of paired
proportions: se = sqrt(lost + gained - (gained - lost)^2 / n) / n. This is the statistic of the engine's
`paired_accuracy_loss` (src/core/accuracy_loss.h, which `klspec calibrate` prints), with n for n - 1; `klspec
sweep` does not print it yet, so this reads its examples.jsonl.
"""
import collections
import json
import math
import sys


def paired_change(base, result):
    """base, result: problem id -> correct. Returns (n, lost, gained, change, half_width), the last two in
    points (percent of n): the change of accuracy and its 95 % interval's half-width."""
    ids = set(base) & set(result)
    n = len(ids)
    if n == 0:
        raise ValueError("paired_diff: the two settings share no problem")
    lost = sum(base[i] and not result[i] for i in ids)
    gained = sum(result[i] and not base[i] for i in ids)
    se = math.sqrt(lost + gained - (gained - lost) ** 2 / n) / n
    return n, lost, gained, 100 * (gained - lost) / n, 196 * se


def main():
    for path in sys.argv[1:]:
        correct = collections.defaultdict(dict)  # point -> problem id -> correct
        for line in open(path):
            row = json.loads(line)
            correct[row["point"]][row["id"]] = row["correct"]
        if "vanilla" not in correct:
            sys.exit(f"paired_diff: {path} has no vanilla rows (not a klspec sweep examples.jsonl?)")
        base = correct.pop("vanilla")
        for point, result in correct.items():
            try:
                n, lost, gained, change, half_width = paired_change(base, result)
            except ValueError as error:
                sys.exit(f"{error}: {path}, {point}")
            print(f"{path}: {point}: {n} problems, lost {lost}, gained {gained}: "
                  f"{change:+.1f} ± {half_width:.1f} points (95 %)")


if __name__ == "__main__":
    main()
