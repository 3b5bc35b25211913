"""Shows that a GGUF holds real trained weights: greedy text for three prompts, and the perplexity of a
paragraph of ordinary English under the model against a model of the same shape whose weights are the
same numbers shuffled (every tensor's rows, or a 1-D tensor's entries, permuted at random, types and
shapes kept: a random-weight model with the real one's weight statistics). docs/real-model.md.

  PYTHONPATH=build/python:<llama.cpp cache>/src/gguf-py GOMP_SPINCOUNT=1000 /usr/bin/python3 \
      tools/real_model/check_weights.py MODEL.gguf [--json]

The shuffled copy is written beside the model once (MODEL-shuffled.gguf; never commit it).
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

PROMPTS = ["The capital of France is", "Water boils at a temperature of", "def add(a, b):\n"]
# Ordinary English, written for this check (so it is in no training set verbatim).
PARAGRAPH = ("On Saturday morning the market in the old town square was busier than usual. Farmers had brought "
             "the last apples of the season, and a baker was selling bread that was still warm from the oven. "
             "Children ran between the stalls while their parents compared prices and talked about the weather, "
             "which had been cold and wet for most of the week. By noon most of the vegetables were gone, and the "
             "sellers began to pack their boxes into the backs of their vans.")


def write_shuffled(model, out, seed=0):
    import gguf
    from gguf_copy import write_model
    reader = gguf.GGUFReader(str(model))
    rng = np.random.default_rng(seed)
    tensors = []
    for tensor in reader.tensors:
        data = np.array(tensor.data)  # rows of quantized blocks (or values): permuting rows keeps every block whole
        if data.ndim > 0 and data.shape[0] > 1:
            data = data[rng.permutation(data.shape[0])]
        tensors.append((tensor.name, data, tensor.tensor_type))
    write_model(reader, out, lambda name, value: value, tensors)


def perplexity(engine, text):
    tokens = engine.tokenize(text, add_bos=True)
    logits = np.asarray(engine.forward(tokens), dtype=np.float64)
    log_z = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
    nll = [log_z[i] - logits[i, tokens[i + 1]] for i in range(len(tokens) - 1)]
    return math.exp(float(np.mean(nll))), len(nll)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.model.is_file():
        sys.exit(f"check_weights: {a.model}: no such file")
    import klspec
    shuffled = a.model.with_name(a.model.stem + "-shuffled.gguf")
    if not shuffled.exists():
        write_shuffled(a.model, shuffled.with_suffix(".partial"))
        shuffled.with_suffix(".partial").rename(shuffled)
    real = klspec.Engine(str(a.model), threads=2, ctx=512)
    report = {"greedy": {p: real.generate(p, max_tokens=32, draft_policy="off").text for p in PROMPTS}}
    ppl, n = perplexity(real, PARAGRAPH)
    rand = klspec.Engine(str(shuffled), threads=2, ctx=512)
    ppl_random, _ = perplexity(rand, PARAGRAPH)
    report.update({"paragraph_tokens": n, "perplexity": ppl, "perplexity_shuffled": ppl_random,
                   "uniform_perplexity": real.forward([2]).shape[1]})
    if a.json:
        print(json.dumps(report, indent=2))
        return
    for prompt, text in report["greedy"].items():
        print(f"{json.dumps(prompt)} -> {json.dumps(text)}")
    print(f"perplexity over {n} tokens: {ppl:.1f} (real weights), {ppl_random:.1f} (shuffled weights), "
          f"{report['uniform_perplexity']} (uniform over the vocabulary)")


if __name__ == "__main__":
    main()
