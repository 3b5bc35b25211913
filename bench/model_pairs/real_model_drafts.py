#!/usr/bin/python3
"""The real model's drafts (docs/real-model.md): for each draft GGUF, greedy acceptance and MAT at fixed γ 4
and 8 on GSM8K test problems (plain 2-shot prompts), its cost per token against the target's
(target-only decoding of each file alone, tokens/s of the decode), and the throughput of γ 4 and of the
automatic choice (the default, `--draft-policy auto`) against target-only; the split of a token's cost between the
layers and the output head (a line through the per-token times of files with different layer counts: the
drafts named exit<k>, k layers, exit<k>-adapter k + 1); the target with and without --no-repack; then, side by
side in the same run, klspec and llama.cpp's own `llama-speculative-simple` on the same files, prompt and γ.

  /usr/bin/python3 bench/model_pairs/real_model_drafts.py TARGET.gguf DRAFT.gguf [DRAFT.gguf ...] [--limit 8] [-n 64]

Each run's JSON is kept under --work (default ~/.cache/klspec/real-drafts, keyed by file names and flags)
and reused by a rerun. Prints Markdown tables with the machine (lscpu) above them.
"""
import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "grown_target"))  # find_llama_bin
import bench_common as common  # noqa: E402
from grow_target import find_llama_bin  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KLSPEC = ROOT / "build" / "klspec"
PROMPT = "Question: A baker makes 24 rolls in the morning and twice as many in the afternoon. How many rolls does he make?\nAnswer:"


def cached(work, key_parts, command):
    key = hashlib.sha256(json.dumps([str(p) for p in key_parts]).encode()).hexdigest()[:16]
    path = work / f"{key}.json"
    if not path.exists():
        path.write_text(common.run(command).stdout)
    return json.loads(path.read_text())


def bench(work, target, draft, gamma, a):
    flags = ["--dataset", "gsm8k", "--limit", a.limit, "--few-shot", 2, "-n", a.n, "-t", 2, "--json"]
    if draft is None:
        flags += ["--draft-policy", "off"]
    elif gamma == "auto":
        flags += ["-md", draft, "--draft-policy", "auto"]
    else:
        flags += ["-md", draft, "--draft-policy", "fixed", "--draft-max", gamma]
    return cached(work, [target, draft, gamma, *flags], [KLSPEC, "bench", "-m", target, *flags])


def decode_speed(work, model, a, extra=()):
    flags = ["-p", PROMPT, "-n", a.n, "-t", 2, "--draft-policy", "off", "--json", *extra]
    return cached(work, [model, *flags], [KLSPEC, "generate", "-m", model, *flags])["stats"]["tokens_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", type=Path)
    ap.add_argument("drafts", type=Path, nargs="+")
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "real-drafts")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print("\n".join(common.cpu_header()))
    target_speed = decode_speed(a.work, a.target, a)
    print(f"\nGSM8K test, first {a.limit} problems, 2-shot plain prompts, -n {a.n}, greedy, -t 2; target-only "
          f"decode {target_speed:.1f} tokens/s\n")
    print("| draft | acceptance γ 4 | MAT γ 4 | MAT γ 8 | cost per token (× target's) | tokens/s γ 4 (× target-only) "
          "| tokens/s auto (× target-only) | auto: mean γ, target-only steps |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    target_only = bench(a.work, a.target, None, 0, a)["throughput_tokens_per_second"]
    for draft in a.drafts:
        runs = {g: bench(a.work, a.target, draft, g, a) for g in (4, 8, "auto")}
        s4, s8, auto = runs[4]["stats"], runs[8]["stats"], runs["auto"]["stats"]
        cost = target_speed / decode_speed(a.work, draft, a)
        speed, auto_speed = runs[4]["throughput_tokens_per_second"], runs["auto"]["throughput_tokens_per_second"]
        print(f"| {draft.name} | {100 * s4['acceptance_rate']:.1f} % | {s4['mat']:.2f} | {s8['mat']:.2f} | {cost:.2f} | "
              f"{speed:.1f} ({speed / target_only:.2f}×) | {auto_speed:.1f} ({auto_speed / target_only:.2f}×) | "
              f"{auto['draft_length_sum'] / auto['target_calls']:.2f}, {auto['target_only_steps']} of {auto['target_calls']} |")
    layers_of = {a.target: 18}
    for draft in a.drafts:
        if m := re.search(r"exit(\d+)(-adapter)?", draft.name):
            layers_of[draft] = int(m.group(1)) + (1 if m.group(2) else 0)
    if len(layers_of) >= 3:
        xs = list(layers_of.values())
        ys = [1000 / decode_speed(a.work, f, a) for f in layers_of]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        per_layer = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
        fixed = mean_y - per_layer * mean_x
        print(f"\nms per token against layers ({', '.join(f'{x}: {y:.1f}' for x, y in zip(xs, ys))}): "
              f"{fixed:.1f} ms + {per_layer:.2f} ms/layer; at 18 layers the fixed part (embedding, head, sampling) is "
              f"{100 * fixed / (fixed + 18 * per_layer):.0f} %")
    repacked = decode_speed(a.work, a.target, a)
    plain = decode_speed(a.work, a.target, a, ["--no-repack"])
    print(f"\ntarget-only decode: {repacked:.1f} tokens/s repacked (default), {plain:.1f} with --no-repack "
          f"({plain / repacked:.2f}×)")
    llama_bin = Path(find_llama_bin(None, "llama-speculative-simple")).parent
    print(f"\nSide by side on one prompt, γ 4, -n {a.n}: decode tokens/s\n")
    print("| draft | klspec | llama-speculative-simple | acceptance (klspec / llama.cpp) |")
    print("|---|---:|---:|---:|")
    for draft in a.drafts:
        ours = common.klspec_generate(KLSPEC, a.target, PROMPT, ["-md", draft, "-n", a.n, "-t", 2, "--draft-policy",
                                                                "fixed", "--draft-max", 4])["stats"]
        tokens, seconds, acceptance = common.llama_speculative_simple(llama_bin, a.target, draft, PROMPT, 4, 2, a.n)
        print(f"| {draft.name} | {ours['tokens_per_second']:.1f} | {tokens / seconds:.1f} | "
              f"{100 * ours['acceptance_rate']:.1f} % / {100 * acceptance:.1f} % |")


if __name__ == "__main__":
    main()
