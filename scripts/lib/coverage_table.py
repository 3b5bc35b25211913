#!/usr/bin/python3
"""Per-folder line and branch coverage from two gcovr JSON reports (scripts/coverage.sh): the sanitized half's
selection and the whole plain run, and the share of the plain run's covered src/ lines the first covers too.

  coverage_table.py SANITIZED.json PLAIN.json [--json OUT]
"""
import argparse
import json
from collections import defaultdict
from pathlib import PurePosixPath


def covered_lines(report_path):
    """{file: {line: (hit, branches_total, branches_hit)}} of code lines (gcovr's noncode lines left out)."""
    report = json.load(open(report_path))
    files = {}
    for entry in report["files"]:
        lines = {}
        for line in entry["lines"]:
            if line.get("gcovr/noncode"):
                continue
            branches = line.get("branches", [])
            lines[line["line_number"]] = (line["count"] > 0, len(branches), sum(b["count"] > 0 for b in branches))
        files[entry["file"]] = lines
    return files


def folder(path):
    """src/core/x.cpp -> src/core; python/klspec_module.cpp -> python."""
    parts = PurePosixPath(path).parts
    return "/".join(parts[:2]) if parts[0] == "src" and len(parts) > 2 else parts[0]


def totals(files):
    by_folder = defaultdict(lambda: [0, 0, 0, 0])  # lines, lines hit, branches, branches hit
    for path, lines in files.items():
        row = by_folder[folder(path)]
        for hit, branches, branches_hit in lines.values():
            row[0] += 1
            row[1] += hit
            row[2] += branches
            row[3] += branches_hit
    return dict(sorted(by_folder.items()))


def percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sanitized")
    parser.add_argument("plain")
    parser.add_argument("--json")
    args = parser.parse_args()
    sanitized, plain = covered_lines(args.sanitized), covered_lines(args.plain)
    runs = {"plain": totals(plain), "sanitized selection": totals(sanitized)}
    print("| folder | lines | plain: lines % | branches % | sanitized selection: lines % | branches % |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in runs["plain"].items():
        other = runs["sanitized selection"].get(name, [row[0], 0, row[2], 0])
        # The module is not built with sanitizers: what the selection ran of it (a README snippet) is not the half's.
        columns = ("not built | not built" if name == "python" else
                     f"{percent(other[1], other[0]):.1f} | {percent(other[3], other[2]):.1f}")
        print(f"| {name} | {row[0]} | {percent(row[1], row[0]):.1f} | {percent(row[3], row[2]):.1f} | {columns} |")
    whole = {name: [sum(row[i] for key, row in rows.items() if key.startswith("src")) for i in range(4)]
             for name, rows in runs.items()}
    for name, row in whole.items():
        print(f"src/ by the {name}: lines {percent(row[1], row[0]):.1f} % of {row[0]}, "
              f"branches {percent(row[3], row[2]):.1f} % of {row[2]}")
    plain_hit = {(path, n) for path, lines in plain.items() if path.startswith("src/")
                 for n, (hit, _, _) in lines.items() if hit}
    both = {(path, n) for path, n in plain_hit if sanitized.get(path, {}).get(n, (False,))[0]}
    share = percent(len(both), len(plain_hit))
    print(f"the sanitized selection covers {share:.1f} % of the {len(plain_hit)} src/ lines the plain run covers")
    if args.json:
        json.dump({"folders": runs, "src": whole, "sanitized_share_of_plain_src_lines": share}, open(args.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
