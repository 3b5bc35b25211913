"""Vanilla, KL and Top-K judges on the default pair and the testbed's word problems: MAT, accuracy, tokens/s.

Accuracy is klspec's gsm8k scorer (src/core/answer_scoring.cpp, whose Python twin is tools/testbed/scorers.py):
the number after the first "The answer is " must equal the problem's "final". MAT (emitted tokens per target
call) and tokens/s (per second of each rule's generate_batch, prompts included) are over all problems together.
"""
import argparse, json, pathlib, sys, time

import matplotlib.pyplot as plt
import klspec

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools/testbed"))
from scorers import is_correct  # noqa: E402

RULES = {"vanilla": {}, "kl 0.2": dict(judge="kl", threshold=0.2), "kl 1.0": dict(judge="kl", threshold=1.0),
         "topk 2": dict(judge="topk", topk=2), "topk 4": dict(judge="topk", topk=4)}
DECODING = dict(max_tokens=320, draft_policy="fixed", draft_max=8)  # a fixed γ, as `klspec sweep`: the paper's MAT
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--limit", type=int, default=16, help="the first N problems of data/testbed_word_test.jsonl")
parser.add_argument("--png", default="/tmp/judge_comparison.png", help="where to save the accuracy-against-MAT plot")
args = parser.parse_args()

problems = [json.loads(line) for line in (ROOT / "data/testbed_word_test.jsonl").read_text().splitlines()][:args.limit]
engine = klspec.Engine(str(ROOT / "models/testbed-target.gguf"), str(ROOT / "models/testbed-draft.gguf"),
                       threads=2, parallel=4)  # 4 problems decoded together, one target batch a step
engine.generate(problems[0]["question"], max_tokens=16)  # a warm-up, so that vanilla's tokens/s does not pay for it
print(f"{'rule':8} {'MAT':>5} {'accuracy':>8} {'tokens/s':>8}")
for name, judge in RULES.items():
    start = time.perf_counter()
    results = engine.generate_batch([p["question"] for p in problems], **DECODING, **judge)
    seconds = time.perf_counter() - start
    emitted = sum(r.stats.emitted for r in results)
    mat = emitted / sum(r.stats.target_calls for r in results)
    accuracy = sum(is_correct(p["scorer"], r.text, p["final"]) for p, r in zip(problems, results)) / len(problems)
    print(f"{name:8} {mat:5.2f} {100 * accuracy:7.1f}% {emitted / seconds:8.1f}")
    plt.scatter(mat, 100 * accuracy, label=name)
plt.xlabel("MAT (tokens per target call)"), plt.ylabel("accuracy (%)")
plt.legend(title=f"{len(problems)} word problems, γ 8")
plt.savefig(args.png)
