#!/usr/bin/python3
"""A reduced-vocabulary head for the real pair's draft (FR-Spec, arXiv 2502.14856): what scoring only the N most
frequent tokens saves a draft token, and what it gives up, side by side in one run (issue 60, "a draft that costs a
tenth of its target"). Run it on a quiet machine: llama-bench's threads spin, and a busy core skews them badly.

  /usr/bin/python3 bench/model_pairs/real_pair_vocab.py [--sizes 16384,32768,65536] [--answers FILE.jsonl]
      [--corpus /usr/lib/python3.11] [--corpus-bytes 4000000] [--gammas 4,8] [--acceptance 0.96] [--rounds 3]
      [--work ~/.cache/klspec/real-pair-vocab]

- Ranking: token counts over a corpus that is no benchmark (by default 4 MB of the Python standard library's
  source, files in a seeded order), tokenized with the draft's vocabulary (the klspec Python module); ids never seen
  follow in id order (BPE merge order, roughly frequency).
- Coverage: the share of the target's own answer tokens among the N (--answers: `klspec bench --outputs` rows, by
  default real_pair_paper.sh's target-only HumanEval answers). A token outside them can never be drafted, so the
  draft's per-position acceptance falls by about that share.
- Cost: llama-bench's one token (tg32, -r 3, --rounds interleaved passes, median) for the Q4_0 draft
  (bench/model_pairs/real_pair_drafts.sh) and its reduced copies (tools/real_model/reduced_vocab.py), and for the
  target one token and a batch of γ + 1 (pp), repacked as llama-bench runs them.
- Prediction at each γ: the reduced draft's speculative tokens/s over the full draft's,
  [E(γ, α·coverage) / E(γ, α)] · [(V + γ·d) / (V + γ·d_N)] with E(γ, α) = (1 − α^{γ+1}) / (1 − α), V the batch of
  γ + 1 and d, d_N the drafts' token, all in target tokens; α the full draft's acceptance (--acceptance).
The reduced drafts are cost probes: klspec cannot decode with them (their ids are the ranking's positions).
"""
import argparse
import glob
import json
import os
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
from bench_common import cpu_header, fetch_real_model, run  # noqa: E402


def last_line(cmd, env=None):
    return Path(run(cmd, env=env).stdout.strip().splitlines()[-1])


def ranking_of(tokenize, corpus, corpus_bytes, vocab):
    files = sorted(glob.glob(str(Path(corpus) / "**" / "*.py"), recursive=True))
    if not files:
        sys.exit(f"real_pair_vocab: no .py files under {corpus}")
    random.Random(0).shuffle(files)
    counts, read = {}, 0
    for f in files:
        if read >= corpus_bytes:
            break
        text = Path(f).read_text(errors="replace")
        read += len(text)
        for t in tokenize(text):
            counts[t] = counts.get(t, 0) + 1
    seen = sorted(counts, key=lambda t: (-counts[t], t))
    return seen + sorted(set(range(vocab)) - set(seen)), read, sum(counts.values())


def bench_ms(llama_bench, model, prompt, gen):
    """llama-bench's time for one call of `prompt` tokens, or per generated token, in ms."""
    out = run([llama_bench, "-m", model, "-t", "2", "-p", str(prompt), "-n", str(gen), "-r", "3", "-o", "json"]).stdout
    record = json.loads(out)[0]
    return record["avg_ns"] / 1e6 / max(record["n_gen"], 1)


def expected_tokens(gamma, alpha):
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="16384,32768,65536")
    p.add_argument("--answers", type=Path, default=Path.home() / ".cache/klspec/real-pair-sweeps/target-humaneval.jsonl")
    p.add_argument("--corpus", default="/usr/lib/python3.11")
    p.add_argument("--corpus-bytes", type=int, default=4_000_000)
    p.add_argument("--gammas", default="4,8")
    p.add_argument("--acceptance", type=float, default=0.96,
                   help="the full Q4_0 draft's per-position acceptance (95-97 %% on HumanEval: docs/speed-real-pair.md)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "real-pair-vocab")
    a = p.parse_args()
    if not a.answers.is_file():
        sys.exit(f"real_pair_vocab: {a.answers}: no answers; run KLSPEC_STAGES=target-humaneval "
                 "bench/model_pairs/real_pair_paper.sh first, or pass --answers")
    sizes = sorted(int(n) for n in a.sizes.split(","))
    gammas = [int(g) for g in a.gammas.split(",")]
    a.work.mkdir(parents=True, exist_ok=True)
    target = fetch_real_model("qwen2.5-coder-1.5b")
    made = last_line(["bash", ROOT / "bench" / "model_pairs" / "real_pair_drafts.sh"])
    llama = last_line(["bash", ROOT / "scripts" / "build-llama.sh"])
    llama_bench = llama / "install" / "bin" / "llama-bench"
    draft = made / "draft-q4_0.gguf"

    sys.path.insert(0, str(ROOT / "build" / "python"))
    import klspec  # noqa: E402 (the build tree's module)
    engine = klspec.Engine(str(draft), threads=2)
    tokenize = lambda text: engine.tokenize(text, add_bos=False)  # noqa: E731
    ranking_path = a.work / "ranking.json"
    ranking, read, counted = ranking_of(tokenize, a.corpus, a.corpus_bytes, engine.n_vocab)
    ranking_path.write_text(json.dumps(ranking))
    answer_tokens = [t for line in a.answers.read_text().splitlines() for t in tokenize(json.loads(line)["text"])]
    rank = {t: i for i, t in enumerate(ranking)}
    coverage = {n: sum(rank[t] < n for t in answer_tokens) / len(answer_tokens) for n in sizes}
    del engine

    written = run(["/usr/bin/python3", ROOT / "tools" / "real_model" / "reduced_vocab.py", draft, ranking_path,
                   "--sizes", ",".join(map(str, sizes)), "--out-dir", a.work],
                  env={**os.environ, "PYTHONPATH": f"{llama / 'src' / 'gguf-py'}:{ROOT / 'tools' / 'real_model'}"})
    reduced = dict(zip(sizes, written.stdout.split()))
    models = {"full": draft, **reduced}
    samples = {name: [] for name in models}
    target_token, batch = [], {g: [] for g in gammas}
    for _ in range(a.rounds):  # interleaved, so that a slow spell falls on every model alike
        target_token.append(bench_ms(llama_bench, target, 0, 32))
        for g in gammas:
            batch[g].append(bench_ms(llama_bench, target, g + 1, 0))
        for name, path in models.items():
            samples[name].append(bench_ms(llama_bench, path, 0, 32))
    t1 = statistics.median(target_token)
    cost = {name: statistics.median(v) for name, v in samples.items()}

    print("\n".join(cpu_header()))
    print(f"\nRanking: {counted:,} tokens of {read:,} bytes under {a.corpus}; coverage over {len(answer_tokens):,} "
          f"tokens of {a.answers.name}. Target one token {t1:.1f} ms (llama-bench tg32, repacked); "
          + ", ".join(f"a batch of {g + 1} {statistics.median(batch[g]) / t1:.2f}×" for g in gammas)
          + f"; α {a.acceptance}.\n")
    print("| draft head | coverage | ms a token (× target) | draft speed × full head | "
          + " | ".join(f"predicted speculative speed at γ {g}, × full head" for g in gammas) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(gammas))
    for name in models:
        c = 1.0 if name == "full" else coverage[name]
        cells = []
        for g in gammas:
            v = statistics.median(batch[g]) / t1
            d, d_n = cost["full"] / t1, cost[name] / t1
            gain = expected_tokens(g, a.acceptance * c) / expected_tokens(g, a.acceptance) * (v + g * d) / (v + g * d_n)
            cells.append(f"{gain:.3f}×")
        label = "full (151,936)" if name == "full" else f"{name:,} most frequent"
        print(f"| {label} | {c:.2%} | {cost[name]:.1f} ({cost[name] / t1:.2f}×) | {cost['full'] / cost[name]:.2f}× | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
