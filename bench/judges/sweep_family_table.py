"""One markdown table over several `klspec sweep` directories (one per benchmark family): per point, the
accuracy change against vanilla with its paired 95 % interval, and MAT; vanilla's row gives its accuracy.

  /usr/bin/python3 bench/judges/sweep_family_table.py word=DIR trace=DIR choice=DIR

Points missing from a directory are shown as "—". Reads each DIR/summary.json (written by klspec sweep).
"""
import json
import sys
from pathlib import Path


def cell(point):
    if point is None:
        return "—"
    if point["rule"] == "vanilla":
        return f"{100 * point['accuracy']:.1f} % · {point['mat']:.2f}"
    low, high = 100 * point["accuracy_change_low"], 100 * point["accuracy_change_high"]
    return f"{100 * point['accuracy_change']:+.1f} [{low:+.1f}, {high:+.1f}] · {point['mat']:.2f}"


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    families = [a.split("=", 1) for a in args]
    points = {name: {p["point"]: p for p in json.loads((Path(d) / "summary.json").read_text())["points"]}
              for name, d in families}
    order = list(dict.fromkeys(key for name, _ in families for key in points[name]))
    print("| rule | " + " | ".join(f"{name}: Δ acc [95 % CI] · MAT" for name, _ in families) + " |")
    print("|---" * (len(families) + 1) + "|")
    for key in order:
        label = "vanilla (accuracy · MAT)" if key == "vanilla" else key.replace(":", " ")
        print(f"| {label} | " + " | ".join(cell(points[name].get(key)) for name, _ in families) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
