#!/usr/bin/env python3
"""Engine throughput on a JSONL dataset with `klspec bench`, one configuration per row, interleaved.

Each configuration is a label and extra `klspec bench` flags; every row reports the medians over
--repeats interleaved runs of: decode tokens/s of one sequence's own accounting (emitted / its decode
time; with -np > 1 steps are shared, so this is per-sequence speed), throughput (all emitted tokens over
the run's wall time, prompts included), MAT and acceptance. A binary other than build/klspec (an older
build, for before/after) is given as LABEL=PATH with --binary; another ggml build under the same binary
(llamafile's sgemm on, say) as LABEL=DIR with --lib-path, DIR going first on LD_LIBRARY_PATH (checked with
ldd, as bench/lib/llama_bench_lib.py does).

  python3 bench/speed/engine_throughput.py --limit 64 --repeats 3 \\
      --config np1: --config "np8:-np 8" --config "p-min 0.5:--draft-p-min 0.5"
  python3 bench/speed/engine_throughput.py --lib-path sgemm-off=$LLAMA/install/lib \\
      --lib-path sgemm-on=~/.cache/klspec/ggml-llamafile-de3ff815ea7d/build/bin:$LLAMA/install/lib ...
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import DEFAULT_KLSPEC, ROOT, run  # noqa: E402
from llama_bench_lib import check_override, env_for  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", action="append", default=[], metavar="LABEL=PATH",
                        help="klspec binaries to compare (default: new=build/klspec)")
    parser.add_argument("--lib-path", action="append", default=[], metavar="LABEL=DIR",
                        help="build/klspec on the ggml libraries in DIR (e.g. a GGML_LLAMAFILE=ON build) (repeatable)")
    parser.add_argument("--config", action="append", default=[], metavar="LABEL:FLAGS",
                        help="a configuration: label, colon, extra klspec bench flags (repeatable)")
    parser.add_argument("--dataset", type=Path, default=ROOT / "data/testbed_word_test.jsonl")
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--common", default="-t 1 -n 320 --draft-max 8",
                        help="flags given to every run (default: %(default)s)")
    args = parser.parse_args()
    binaries = [(*b.split("=", 1), None) for b in args.binary]
    binaries += [(label, str(DEFAULT_KLSPEC), lib) for label, lib in (entry.split("=", 1) for entry in args.lib_path)]
    binaries = binaries or [("new", str(DEFAULT_KLSPEC), None)]
    for _, binary, lib in binaries:
        if lib:
            check_override(binary, lib)
    configs = [c.split(":", 1) for c in args.config] or [["np1", ""]]

    rows = {}
    for _ in range(args.repeats):
        for label, binary, lib in binaries:
            for name, flags in configs:
                cmd = [binary, "bench", "--dataset", args.dataset, "--limit", str(args.limit), "--json",
                       *args.common.split(), *flags.split()]
                out = json.loads(run(cmd, env_for(lib)).stdout)
                stats = out["stats"]
                wall = out.get("wall_seconds")
                throughput = out.get("throughput_tokens_per_second",
                                     stats["emitted"] / wall if wall else float("nan"))
                accuracy = (out.get("accuracy") or {}).get("rate", float("nan"))
                rows.setdefault((label, name), []).append(
                    (stats["tokens_per_second"], throughput, stats["mat"], stats["acceptance_rate"], accuracy))

    print(f"| binary | configuration | decode tokens/s | throughput tokens/s (wall) | MAT | acceptance | accuracy |")
    print("|---|---|---|---|---|---|---|")
    for (label, name), samples in rows.items():
        med = [statistics.median(s[i] for s in samples) for i in range(5)]
        print(f"| {label} | {name} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.2f} | {100 * med[3]:.1f} % | {100 * med[4]:.1f} % |")


if __name__ == "__main__":
    main()
