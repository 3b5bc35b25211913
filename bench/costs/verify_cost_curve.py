"""Verify-cost curve from llama-bench: the time of one llama_decode of a batch of b tokens (b = 1..17 by
default), relative to a single-token decode, for each GGUF given. Writes a CSV and a markdown table.

  /usr/bin/python3 bench/costs/verify_cost_curve.py models/testbed-target.gguf models/testbed-draft.gguf \
      ../shared/models/stories260K/stories260K.gguf --csv OUT.csv --md OUT.md [--reps 5] [--threads 1] \
      [--batches 1-17] [--taskset 1] [--lib-path DIR[:DIR] --label sgemm-on]

What llama-bench measures (`-p b -n 0`): llama_decode of b tokens at positions 0..b-1 of an empty KV
cache, **only the last token's logits requested** (llama_batch_get_one), after one warm-up run. A
verification pass requests logits for all b positions, so this is a floor on its time (a ceiling on
batching's gain), not the engine's own number; the engine's measurement is added beside it later.
llama-bench runs with LD_LIBRARY_PATH=<install>/lib (the libraries klspec links), checked with ldd;
`--lib-path` runs it on another ggml build instead (e.g. one with llamafile's sgemm on, followed by
<install>/lib for libllama).
"""
import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: llama_bench_lib
import llama_bench_lib as lb  # noqa: E402


def parse_batches(text):
    out = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        else:
            out.append(int(part))
    if 1 not in out:
        out.insert(0, 1)
    return sorted(set(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--batches", default="1-17", help="e.g. 1-17 or 1,2,4,9,17 (1 is always added)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5, help="llama-bench -r")
    ap.add_argument("--rounds", type=int, default=1, help="run llama-bench this many times per model and pool the samples")
    ap.add_argument("--taskset", type=int, default=None, help="pin llama-bench to this CPU")
    ap.add_argument("--llama-bench", type=Path, default=None, help="default: <pinned install>/bin/llama-bench")
    ap.add_argument("--lib-path", default=None, help="LD_LIBRARY_PATH for llama-bench (default: <install>/lib)")
    ap.add_argument("--label", default=None, help="name of this build in the outputs (default: main or the lib path)")
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--md", type=Path, default=None)
    a = ap.parse_args()

    install = lb.default_llama_install()
    binary = a.llama_bench or install / "bin" / "llama-bench"
    label = a.label or ("main" if not a.lib_path else str(a.lib_path))
    lib_path = a.lib_path or str(install / "lib")
    libs = lb.check_override(binary, lib_path)
    print("libraries: " + ", ".join(f"{n} => {p}" for n, p in sorted(libs.items())), file=sys.stderr)
    batches = parse_batches(a.batches)

    rows = []
    commands = []
    for model in a.models:
        if not model.exists():
            sys.exit(f"verify_cost_curve: no such file {model}")
        pooled = {}
        for _ in range(a.rounds):
            commands.append(lb.command_line(binary, model, batches, [], a.threads, a.reps, lib_path, taskset=a.taskset))
            recs = lb.llama_bench(binary, model, batches, [], a.threads, a.reps, lib_path, taskset=a.taskset)
            for key, s in lb.summarize(recs).items():
                pooled.setdefault(key, []).extend(s)
        one = lb.stats(pooled[("pp", 1)], 1)
        for b in batches:
            s = lb.stats(pooled[("pp", b)], b)
            rows.append({"model": model.name, "build": label, "threads": a.threads, "b": b,
                         "ms": round(s["ms"], 4), "mean_ms": round(s["mean_ms"], 4),
                             "sd_ms": round(s["sd_ms"], 4), "min_ms": round(s["min_ms"], 4), "samples": s["k"],
                         "tokens_per_s": round(s["tps"], 1), "cost_vs_1": round(s["ms"] / one["ms"], 3),
                         "cost_per_token_vs_1": round(s["ms"] / one["ms"] / b, 3)})
        print(f"{model.name}: done", file=sys.stderr)

    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    names = list(dict.fromkeys(r["model"] for r in rows))
    lines = [f"llama-bench, {a.threads} thread(s), build `{label}`; cell = ms per decode call (median ± sd of all samples) and cost "
             "relative to b = 1",
             "",
             "| b | " + " | ".join(names) + " |",
             "|---:|" + "---:|" * len(names)]
    for b in batches:
        cells = []
        for n in names:
            r = next(r for r in rows if r["model"] == n and r["b"] == b)
            cells.append(f"{r['ms']:.3f} ± {r['sd_ms']:.3f} ms, **{r['cost_vs_1']:.2f}×**")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lb.write_report(lines + [""], commands, a.rounds, a.md)


if __name__ == "__main__":
    main()
