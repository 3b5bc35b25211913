#!/usr/bin/python3
"""Block against token-by-token verification when sampling, on the default pair's word problems: MAT (tokens
per target call), acceptance and accuracy per temperature, with the block-minus-token MAT difference's 95 %
interval (paired bootstrap over problems, 2000 resamples). Fixed γ 8, the vanilla judge, the same seed.

  /usr/bin/python3 bench/judges/block_verification.py [--limit 150] [--temps 0.7,1.0] [--work ~/.cache/klspec/blockverify]

Each `klspec bench` run is kept under --work (JSON summary and per-problem JSONL) and reused by a rerun.
"""
import argparse
import json
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(work, temp, verify, limit, threads):
    summary, outputs = work / f"T{temp}-{verify}.json", work / f"T{temp}-{verify}.jsonl"
    if not summary.exists():
        cmd = [ROOT / "build" / "klspec", "bench", "--dataset", ROOT / "data" / "testbed_word_test.jsonl", "--limit",
               limit, "-n", 256, "--temp", temp, "--verify", verify, "--draft-policy", "fixed", "--draft-max", 8,
               "-t", threads, "-np", 4, "-s", 1, "--outputs", outputs, "--json"]
        done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
        summary.write_text(done.stdout)
    rows = [json.loads(line) for line in outputs.read_text().splitlines()]
    return json.loads(summary.read_text()), sorted(rows, key=lambda r: r["index"])


def mat(rows, picks):
    return sum(rows[i]["stats"]["emitted"] for i in picks) / sum(rows[i]["stats"]["target_calls"] for i in picks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--temps", default="0.7,1.0")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "blockverify")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print("| T | verification | MAT | acceptance | accuracy | block − token MAT [95 % CI] |")
    print("|---|---|---:|---:|---:|---|")
    rng = random.Random(0)
    for temp in a.temps.split(","):
        (token_summary, token_rows), (block_summary, block_rows) = (
            bench(a.work, temp, v, a.limit, a.threads) for v in ("token", "block"))
        n = len(token_rows)
        everything = range(n)
        differences = sorted(mat(block_rows, p) - mat(token_rows, p)
                             for p in ([rng.randrange(n) for _ in everything] for _ in range(2000)))
        low, high = differences[49], differences[1949]
        for name, summary in (("token", token_summary), ("block", block_summary)):
            s = summary["stats"]
            delta = (f"{mat(block_rows, everything) - mat(token_rows, everything):+.3f} [{low:+.3f}, {high:+.3f}]"
                     if name == "block" else "")
            print(f"| {temp} | {name} | {s['mat']:.3f} | {100 * s['acceptance_rate']:.1f} % | "
                  f"{100 * summary['accuracy']['rate']:.1f} % | {delta} |")


if __name__ == "__main__":
    main()
