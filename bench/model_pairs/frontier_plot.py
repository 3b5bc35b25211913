"""The agreement-against-MAT and accuracy-against-MAT frontiers of several sweeps of the same problems, one
plot each, every rule a series, every point with its 95 % interval (Wilson) and labelled with its value:
the same answer as vanilla over all problems (the sweep's own figure), the same over the problems where
vanilla's output holds an answer (an output cut at -n scores "", and two such outputs agree without saying
anything about the rule), and accuracy. A sweep reruns vanilla whenever a sweep-wide setting differs (a head,
a judge window), so vanilla is taken from the first folder only. Used for docs/real-model.md's plots
(gnuplot draws them).

  /usr/bin/python3 bench/model_pairs/frontier_plot.py --title "GSM8K, 200 problems" --out docs/real-model-gsm8k \
      SWEEP_DIR [SWEEP_DIR...]      # writes docs/real-model-gsm8k-{agreement,answered-agreement,accuracy}-vs-mat.svg
"""
import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from bench_common import wilson  # noqa: E402
from relaxation_survival import answered_agreement, load  # noqa: E402  (this folder: on sys.path as the script's)


def answered_share(examples, vanilla):
    """Same answer as vanilla over the problems vanilla answered: (share, low, high)."""
    answered, same = answered_agreement(examples, vanilla)
    return (same / len(answered), *wilson(same, len(answered))) if answered else (1, 1, 1)


def series_of(rule, value):
    """A rule's series and a point's label: FSD's divergences are separate series (fsd:js/0.1 -> fsd js, 0.1;
    fsd:1 uses its default, reverse KL)."""
    if rule == "fsd":
        divergence, _, threshold = value.rpartition("/")
        return f"fsd {divergence or 'rkl'}", threshold
    return rule, value


def load_points(dirs):
    """rule -> [(mat, value, agreement, low, high, accuracy, low, high, answered agreement, low, high)],
    vanilla once."""
    series = defaultdict(list)
    vanilla = None
    for index, folder in enumerate(dirs):
        summary = Path(folder) / "summary.json"
        if not summary.is_file():
            sys.exit(f"frontier_plot: {summary} is missing (klspec sweep ... --summary-only writes it)")
        examples = load([folder])
        vanilla = vanilla or examples["vanilla"]
        for p in json.loads(summary.read_text())["points"]:
            if p["rule"] == "vanilla" and index > 0:
                continue
            low, high = wilson(p["correct"], p["examples"])
            is_vanilla = p["rule"] == "vanilla"
            agreement = (1, 1, 1) if is_vanilla else (p["agreement"], p["agreement_low"], p["agreement_high"])
            answered = (1, 1, 1) if is_vanilla else answered_share(examples[p["point"]], vanilla)
            name, value = series_of(p["rule"], p["value"] or "-")
            series[name].append((p["mat"], value, *agreement, p["accuracy"], low, high, *answered))
    return series


COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4"]


def plot(series, title, ylabel, columns, svg):
    """columns: indices of (y, low, high) in a point's tuple."""
    y, low, high = columns
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for n, (rule, points) in enumerate(sorted(series.items())):
            data = Path(tmp) / f"{n}.dat"
            data.write_text("".join(f"{p[0]} {100 * p[y]} {100 * p[low]} {100 * p[high]} {p[1]}\n"
                                    for p in sorted(points)))
            plots.append(f"'{data}' using 1:2:3:4 with yerrorlines pt {n + 4} lw 1.5 "
                         f"lc rgb '{COLOURS[n % len(COLOURS)]}' title '{rule}'")
            plots.append(f"'{data}' using 1:2:5 with labels offset 1.2,0.6 font ',9' notitle")
        script = "\n".join([
            "set terminal svg size 760,480 dynamic font 'sans,12'",
            f"set output '{svg}'",
            f"set title '{title}'",
            "set xlabel 'MAT (tokens per target call)'",
            f"set ylabel '{ylabel} (%, 95 % interval)'",
            "set key outside right top",
            "set grid",
            "plot " + ", ".join(plots),
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", help="klspec sweep --out folders of the same problems")
    parser.add_argument("--title", required=True)
    parser.add_argument("--out", required=True, help="path prefix of the two SVGs")
    args = parser.parse_args()
    series = load_points(args.dirs)
    plot(series, f"Same answer as vanilla, {args.title}", "same answer as vanilla", (2, 3, 4),
         f"{args.out}-agreement-vs-mat.svg")
    plot(series, f"Same answer as vanilla where vanilla answered, {args.title}", "same answer, vanilla answered",
         (8, 9, 10), f"{args.out}-answered-agreement-vs-mat.svg")
    plot(series, f"Accuracy, {args.title}", "accuracy", (5, 6, 7), f"{args.out}-accuracy-vs-mat.svg")
    print("\n".join(f"{args.out}-{name}-vs-mat.svg" for name in ("agreement", "answered-agreement", "accuracy")))


if __name__ == "__main__":
    main()
