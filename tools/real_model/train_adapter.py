"""Train a one-layer adapter on the k-th hidden state of a Gemma 3 GGUF (Kangaroo's recipe: the target's
first k layers and its output head frozen, one layer trained) and write the draft as a GGUF that llama.cpp
runs as plain `gemma3` with k + 1 layers: the target's layers 0..k-1 copied byte for byte, the adapter as
layer k (F16 matrices, F32 norms), the adapter's own copy of the final norm, and the tied embedding/head
copied as it is. docs/real-model.md has the recipe's measured time and the draft's acceptance.

  PYTHONPATH=<llama.cpp cache>/src/gguf-py:tools/real_model /usr/bin/python3 tools/real_model/train_adapter.py \
      MODEL.gguf --layers K [--data GSM8K_TRAIN.jsonl] [--sequences 240] [--steps 400] [--out DRAFT.gguf]

Recipe: the adapter starts as the target's own layer k (so before training the draft is the (k+1)-layer early
exit). Data: the target's own next-token distributions, teacher-forced on GSM8K train problems written as
the sweep's plain prompts ("Question: …\\nAnswer: …", calculator annotations removed), never on test problems.
Loss per sequence: KL(p_target ‖ p_draft) over the full vocabulary at 48 random positions, plus the mean
squared distance of the final-normed hidden states at every position (weight 1). Adam, lr 3e-4, one
sequence a step. The first 10 % of the sequences are held out: their top-1 agreement with the target (the
greedy acceptance of a one-token draft) is printed before and after. Deterministic for a seed.
"""
import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

import gguf
from gemma3_torch import Gemma3, Gemma3Layer, GgufWeights
from gguf_copy import write_model

ROOT = Path(__file__).resolve().parents[2]


def load_texts(path, count):
    texts = []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            answer = re.sub(r"<<[^>]*>>", "", row["answer"])
            answer = re.sub(r"\n#### (.*)$", r" The answer is \1.", answer.strip())
            texts.append(f"Question: {row['question']}\nAnswer: {answer}")
            if len(texts) == count:
                break
    return texts


def tokenize(reader_path, texts):
    import klspec  # the engine's own tokenizer, as the sweep's prompts are tokenized
    engine = klspec.Engine(str(reader_path), threads=2, ctx=512)
    return [engine.tokenize(t, add_bos=True)[:400] for t in texts]


def draft_normed(adapter, residual, output_norm, eps):
    """The draft's final-normed hidden state: the adapter layer over the k-th residual, then its own output norm."""
    y = adapter(residual)
    return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * output_norm


def write_draft(weights, adapter, output_norm, k, out):
    reader = weights.reader

    def changed(name, value):
        if name == f"{weights.arch}.block_count":
            return k + 1
        if name == "general.name":
            return f"{value} (first {k} layers and a trained adapter layer)"
        return value

    tensors = []  # (name, numpy data, ggml type)
    for t in reader.tensors:
        m = re.match(r"^blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= k:
            continue
        if t.name == "output_norm.weight":
            tensors.append((t.name, output_norm.detach().numpy().astype(np.float32), gguf.GGMLQuantizationType.F32))
        else:
            tensors.append((t.name, t.data, t.tensor_type))
    for name, param in adapter.w.items():
        data = param.detach().numpy()
        matrix = data.ndim == 2
        tensors.append((f"blk.{k}.{name}.weight", data.astype(np.float16 if matrix else np.float32),
                        gguf.GGMLQuantizationType.F16 if matrix else gguf.GGMLQuantizationType.F32))
    write_model(reader, out, changed, tensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--layers", type=int, required=True, help="k: the adapter reads the hidden state after k layers")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "datasets" / "gsm8k" / "train.jsonl")
    ap.add_argument("--sequences", type=int, default=240)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--positions", type=int, default=48, help="positions per sequence in the full-vocabulary KL")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    for path in (a.model, a.data):
        if not path.is_file():
            sys.exit(f"train_adapter: {path}: no such file")
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(a.seed)
    start = time.time()
    weights = GgufWeights(a.model)
    k = a.layers
    if not 1 <= k < weights.n_layer:
        sys.exit(f"train_adapter: --layers must be in 1..{weights.n_layer - 1}")
    target = Gemma3(weights)
    sequences = tokenize(a.model, load_texts(a.data, a.sequences))
    # The frozen part once: the residual after k layers (the adapter's input) and the target's normed output,
    # kept beside the model for a rerun with other training settings.
    frozen = a.model.with_name(f"{a.model.stem}-adapter-data-k{k}-n{a.sequences}.pt")
    if frozen.exists():
        inputs, teacher = torch.load(frozen)
    else:
        inputs, teacher = [], []
        with torch.no_grad():
            for tokens in sequences:
                x = target.embd[torch.tensor(tokens)] * math.sqrt(weights.n_embd)
                for i, layer in enumerate(target.layers):
                    if i == k:
                        inputs.append(x.clone())
                    x = layer(x)
                teacher.append(target.normed(x))
        torch.save((inputs, teacher), frozen)
    n_tokens = sum(len(s) for s in sequences)
    print(f"data: {len(sequences)} sequences, {n_tokens} tokens, frozen passes in {time.time() - start:.0f} s", flush=True)
    adapter = Gemma3Layer(weights, k, trainable=True)
    output_norm = torch.nn.Parameter(target.output_norm.clone())
    held_out = max(1, len(sequences) // 10)

    def agreement():
        same = total = 0
        with torch.no_grad():
            for i in range(held_out):
                d = draft_normed(adapter, inputs[i], output_norm, weights.eps) @ target.embd.T
                t = teacher[i] @ target.embd.T
                same += int((d.argmax(-1) == t.argmax(-1)).sum())
                total += len(d)
        return same / total

    print(f"held-out top-1 agreement before training (the {k + 1}-layer early exit): {agreement():.3f}", flush=True)
    optimizer = torch.optim.Adam(list(adapter.parameters()) + [output_norm], lr=a.lr)
    train = list(range(held_out, len(sequences)))
    for step in range(a.steps):
        i = train[rng.integers(len(train))]
        normed = draft_normed(adapter, inputs[i], output_norm, weights.eps)
        mse = (normed - teacher[i]).pow(2).mean()
        pick = torch.from_numpy(rng.choice(len(normed), size=min(a.positions, len(normed)), replace=False))
        with torch.no_grad():
            p_log = torch.log_softmax(teacher[i][pick] @ target.embd.T, dim=-1)
        q_log = torch.log_softmax(normed[pick] @ target.embd.T, dim=-1)
        kl = (p_log.exp() * (p_log - q_log)).sum(-1).mean()
        loss = kl + mse
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == a.steps - 1:
            print(f"step {step}: KL {kl.item():.3f}, hidden MSE {mse.item():.4f} ({time.time() - start:.0f} s)", flush=True)
    print(f"held-out top-1 agreement after training: {agreement():.3f}; {time.time() - start:.0f} s in all", flush=True)
    out = a.out or a.model.with_name(f"{a.model.stem}-exit{k}-adapter.gguf")
    partial = out.with_suffix(".partial")
    write_draft(weights, adapter, output_norm, k, partial)
    partial.rename(out)
    print(out)


if __name__ == "__main__":
    main()
