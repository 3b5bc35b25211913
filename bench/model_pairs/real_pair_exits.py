#!/usr/bin/python3
"""Early-exit drafts of the real pair's 0.5B draft, untrained: what each costs a token and how often the target
accepts it, side by side in one run (issue 60, "a draft that costs a tenth of its target").

  /usr/bin/python3 bench/model_pairs/real_pair_exits.py [--exits 12,18] [--gammas 2,4] [--limit 1] [-n 256]
      [--klspec build/klspec] [--work ~/.cache/klspec/real-pair-exits]

The drafts are the Q4_0 draft (bench/model_pairs/real_pair_drafts.sh) and its first K layers with its own final norm
and head (tools/real_model/early_exit.py, KLSPEC_DRAFT_EXITS), written into the cache. Per draft: llama-bench's
one-token cost (tg16, median of 3, repacked as klspec loads drafts) against the target's, and `klspec bench` on the
first --limit HumanEval problems (EvalPlus's chat prompt, greedy, -t 2) at each fixed γ: acceptance, MAT, decode
tokens/s against target-only's in the same run. Prints a markdown table, the CPU first.
"""
import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
from bench_common import cpu_header, run  # noqa: E402


def last_line(cmd, env=None):
    return Path(run(cmd, env=env).stdout.strip().splitlines()[-1])


def one_token_ms(llama_bench, model):
    out = run([llama_bench, "-m", model, "-t", "2", "-p", "0", "-n", "16", "-r", "3", "-o", "json"]).stdout
    record = json.loads(out)[0]
    return record["avg_ns"] / 1e6 / record["n_gen"]


def bench(a, target, draft, flags, out):
    if not out.exists():
        cmd = [a.klspec, "bench", "-m", target, "--dataset", "humaneval", "--data-dir", str(ROOT.parent / "shared" / "datasets"),
               "--limit", str(a.limit), "-n", str(a.n), "-t", "2", "--json", *flags]
        if draft is not None:
            cmd += ["-md", draft]
        out.write_text(run([str(c) for c in cmd]).stdout)
    return json.loads(out.read_text())["stats"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--exits", default="12,18", help="layers kept, of 24 (comma-separated)")
    p.add_argument("--gammas", default="2,4")
    p.add_argument("--limit", type=int, default=1)
    p.add_argument("-n", type=int, default=256)
    p.add_argument("--klspec", default=str(ROOT / "build" / "klspec"))
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "real-pair-exits",
                   help="results kept here and reused by a rerun (delete it to measure again)")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    target = last_line(["bash", ROOT / "scripts" / "fetch-real-model.sh", "qwen2.5-coder-1.5b"])
    made = last_line(["bash", ROOT / "bench" / "model_pairs" / "real_pair_drafts.sh"],
                     env={**os.environ, "KLSPEC_DRAFT_EXITS": a.exits})
    llama_bench = last_line(["bash", ROOT / "scripts" / "build-llama.sh"]) / "install" / "bin" / "llama-bench"
    drafts = {"0.5B Q4_0, 24 layers": made / "draft-q4_0.gguf"}
    for k in sorted((int(k) for k in a.exits.split(",")), reverse=True):
        drafts[f"0.5B Q4_0, exit {k}"] = made / f"draft-q4_0-exit{k}.gguf"
    t1 = one_token_ms(llama_bench, target)
    alone = bench(a, target, None, ["--draft-policy", "off"], a.work / "target-only.json")
    print("\n".join(cpu_header()))
    print(f"\nTarget one token (llama-bench tg16): {t1:.1f} ms; target-only decoding {alone['tokens_per_second']:.2f} tok/s\n")
    print("| draft | ms a token (× target) | γ | acceptance | MAT | decode tok/s | × target-only |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, path in drafts.items():
        cost = one_token_ms(llama_bench, path)
        for g in a.gammas.split(","):
            s = bench(a, target, path, ["--draft-policy", "fixed", "--draft-max", g], a.work / f"{path.stem}-g{g}.json")
            print(f"| {name} | {cost:.1f} ({cost / t1:.2f}×) | {g} | {s['acceptance_rate']:.1%} | {s['mat']:.2f} | "
                  f"{s['tokens_per_second']:.2f} | {s['tokens_per_second'] / alone['tokens_per_second']:.2f}× |")


if __name__ == "__main__":
    main()
