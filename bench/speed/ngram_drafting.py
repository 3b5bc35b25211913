#!/usr/bin/python3
"""N-gram drafting (llama.cpp's common_speculative, `--spec-type ngram-*`) against target-only decoding and
the draft model, on the default pair's word problems: MAT, acceptance, accuracy and decode tokens/s, with
the prob-threshold and topk relaxations, the chain n-gram → draft model, and the automatic draft length
against every fixed one. Greedy, `-t 2`, `-n 256`; the runs are interleaved over --rounds passes and each
setting's tokens/s is the median of its passes (its ratio to target-only: the median of the per-pass ratios).

  /usr/bin/python3 bench/speed/ngram_drafting.py [--limit 60] [--rounds 3] [--work ~/.cache/klspec/ngram]
      [--models TARGET,DRAFT] [--dataset NAME|FILE] [--data-dir DIR] [-n 256] [--settings 0,1,4,...]

--models runs another pair (e.g. the real pair: scripts/fetch-real-model.sh qwen2.5-coder-1.5b / -0.5b) and
--dataset a benchmark by name (humaneval, mbpp-plus, ...: EvalPlus's chat prompts); the settings without the
draft model (n-gram drafts alone) load the target only. --settings picks rows of the table by index.

Each `klspec bench` run is kept under --work (its JSON summary) and reused by a rerun, so an interrupted
run resumes. Prints a Markdown table with the machine (lscpu) above it.
"""
import argparse
import json
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NGRAM = ["--spec-type", "ngram-simple", "--spec-ngram-size-n", "2", "--spec-ngram-size-m", "16"]
SETTINGS = [  # name, flags
    ("target-only", ["--draft-policy", "off"]),
    ("draft model, auto γ", []),
    ("ngram-simple (llama.cpp's sizes 12/48), auto γ", ["--spec-type", "ngram-simple"]),
    ("ngram-mod (n-match 2, n 1..16), auto γ", ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "2",
                                                "--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", "16"]),
    ("ngram-simple 2/16, auto γ", NGRAM),
    *((f"ngram-simple 2/16, fixed γ {g}", NGRAM + ["--draft-policy", "fixed", "--draft-max", str(g)])
      for g in (1, 2, 4, 8, 16)),
    ("ngram-simple 2/16 + prob-threshold 0.1, auto γ", NGRAM + ["--judge", "prob-threshold", "--judge-threshold", "0.1"]),
    ("ngram-simple 2/16 + topk 2, auto γ", NGRAM + ["--judge", "topk", "--judge-topk", "2"]),
    ("ngram-simple 2/16 → draft model, auto γ", ["--spec-type", "ngram-simple,draft-simple", *NGRAM[2:]]),
]


def uses_draft_model(flags):
    return "--spec-type" not in flags or "draft-simple" in flags[flags.index("--spec-type") + 1]


def bench(work, round_, index, flags, a):
    summary = work / f"r{round_}-s{index}.json"
    if not summary.exists():
        models = []
        if a.models:
            target, draft = a.models.split(",")
            models = ["-m", target] + (["-md", draft] if uses_draft_model(flags) else [])
        cmd = [ROOT / "build" / "klspec", "bench", *models, "--dataset", a.dataset, "--data-dir", a.data_dir,
               "--limit", a.limit, "-n", a.n_predict, "-t", 2, *flags, "--json"]
        done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
        summary.write_text(done.stdout)
    return json.loads(summary.read_text())


def machine():
    info = dict(line.split(":", 1) for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if ":" in line)
    keys = ("Model name", "CPU(s)", "L2 cache", "L3 cache")
    return ", ".join(f"{k.strip()}: {info[k].strip()}" for k in keys if k in info)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dataset", default=str(ROOT / "data" / "testbed_word_test.jsonl"))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--models", default="", help="TARGET,DRAFT (default: the default pair)")
    ap.add_argument("-n", "--n-predict", type=int, default=256)
    ap.add_argument("--settings", default="", help="comma-separated row indices (default: all; 0 is target-only)")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "ngram")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    picked = [int(i) for i in a.settings.split(",")] if a.settings else list(range(len(SETTINGS)))
    if picked[0] != 0:
        picked.insert(0, 0)  # the ratios are to target-only
    settings = [SETTINGS[i] for i in picked]
    runs = [[bench(a.work, r, i, SETTINGS[i][1], a) for i in picked] for r in range(a.rounds)]
    print(f"{machine()}; {Path(a.dataset).name} {a.models}, first {a.limit} problems, -n {a.n_predict}, "
          f"{a.rounds} interleaved passes\n")
    print("| setting | MAT | acceptance | n-gram drafted / accepted | mean γ | accuracy | tokens/s | × target-only |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for i, (name, _) in enumerate(settings):
        s = runs[0][i]["stats"]
        speed = statistics.median(r[i]["stats"]["tokens_per_second"] for r in runs)
        ratio = statistics.median(r[i]["stats"]["tokens_per_second"] / r[0]["stats"]["tokens_per_second"] for r in runs)
        print(f"| {name} | {s['mat']:.2f} | {100 * s['acceptance_rate']:.1f} % | {s['ngram_drafted']} / "
              f"{s['ngram_accepted']} | {s['mean_draft_length']:.2f} | {100 * runs[0][i]['accuracy']['rate']:.1f} % | "
              f"{speed:.1f} | {ratio:.2f}× |")


if __name__ == "__main__":
    main()
