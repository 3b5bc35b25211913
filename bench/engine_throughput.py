#!/usr/bin/env python3
"""Engine throughput on a JSONL dataset with `klspec bench`, one configuration per row, interleaved.

Each configuration is a label and extra `klspec bench` flags; every row reports the medians over
--repeats interleaved runs of: decode tokens/s of one sequence's own accounting (emitted / its decode
time; with -np > 1 steps are shared, so this is per-sequence speed), throughput (all emitted tokens over
the run's wall time, prompts included), MAT and acceptance. A binary other than build/klspec (an older
build, for before/after) is given as LABEL=PATH with --binary.

  python3 bench/engine_throughput.py --limit 64 --repeats 3 \\
      --config np1: --config "np8:-np 8" --config "p-min 0.5:--draft-p-min 0.5"
"""
import argparse
import json
import statistics
from pathlib import Path

from bench_common import DEFAULT_KLSPEC, ROOT, run


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", action="append", default=[], metavar="LABEL=PATH",
                        help="klspec binaries to compare (default: new=build/klspec)")
    parser.add_argument("--config", action="append", default=[], metavar="LABEL:FLAGS",
                        help="a configuration: label, colon, extra klspec bench flags (repeatable)")
    parser.add_argument("--dataset", type=Path, default=ROOT / "data/reasoning_test.jsonl")
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--common", default="-t 1 -n 120 --draft-max 8",
                        help="flags given to every run (default: %(default)s)")
    args = parser.parse_args()
    binaries = [b.split("=", 1) for b in args.binary] or [["new", str(DEFAULT_KLSPEC)]]
    configs = [c.split(":", 1) for c in args.config] or [["np1", ""]]

    rows = {}
    for _ in range(args.repeats):
        for label, binary in binaries:
            for name, flags in configs:
                cmd = [binary, "bench", "--dataset", args.dataset, "--limit", str(args.limit), "--json",
                       *args.common.split(), *flags.split()]
                out = json.loads(run(cmd).stdout)
                stats = out["stats"]
                wall = out.get("wall_seconds")
                throughput = out.get("throughput_tokens_per_second",
                                     stats["emitted"] / wall if wall else float("nan"))
                rows.setdefault((label, name), []).append(
                    (stats["tokens_per_second"], throughput, stats["mat"], stats["acceptance_rate"]))

    print(f"| binary | configuration | decode tokens/s | throughput tokens/s (wall) | MAT | acceptance |")
    print("|---|---|---|---|---|---|")
    for (label, name), samples in rows.items():
        med = [statistics.median(s[i] for s in samples) for i in range(4)]
        print(f"| {label} | {name} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.2f} | {100 * med[3]:.1f} % |")


if __name__ == "__main__":
    main()
