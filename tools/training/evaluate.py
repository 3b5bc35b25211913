"""Greedy decoding from a train.py checkpoint: one prompt, or a scored JSONL test set.

  /usr/bin/python3 evaluate.py CKPT.pt --prompt "Q: ...\\nA:" [-n 40] [--logits] [--compare-logits F]
  /usr/bin/python3 evaluate.py CKPT.pt --test data/testbed_word_test.jsonl -n 224 [--out preds.jsonl]

Test rows are scored with their `scorer` field's scorer (tools/testbed/scorers.py); rows without one
with gsm8k's (the number after "The answer is").

With --prompt it prints the continuation exactly as llama-simple would (prompt tokens are
BOS + SentencePiece encoding with the dummy prefix), so the two can be diffed.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: see train.py
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testbed"))
import scorers  # noqa: E402
from model import Config, Llama  # noqa: E402
from tok512 import BOS_ID, EOS_ID, Tok512  # noqa: E402


def load(path):
    ck = torch.load(path, map_location="cpu")
    model = Llama(Config(**ck["config"]))
    model.load_state_dict(ck["model"])
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--prompt")
    ap.add_argument("-n", type=int, default=96, help="max new tokens")
    ap.add_argument("--logits", action="store_true", help="print the top next-token logits of the prompt")
    ap.add_argument("--compare-logits", metavar="FILE",
                    help="max |diff| of the prompt's last logits against FILE (one per line, from dump_logits)")
    ap.add_argument("--test")
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok, model = Tok512(), load(args.ckpt)

    if args.prompt is not None:
        prompt = args.prompt.replace("\\n", "\n")
        ids = [BOS_ID] + tok.encode(prompt)
        print("prompt ids:", ids, file=sys.stderr)
        T = len(ids)
        logits = model(torch.tensor([ids]), torch.arange(T)[None],
                       torch.ones(T, T, dtype=torch.bool).tril()[None, None])[0, -1]
        if args.compare_logits:
            theirs = torch.tensor([float(l) for l in open(args.compare_logits)])
            print(f"logits max|diff| {float((theirs - logits).abs().max()):.2e} "
                  f"(range {float(logits.min()):.2f}..{float(logits.max()):.2f}), "
                  f"argmax {int(logits.argmax())} vs {int(theirs.argmax())}", file=sys.stderr)
        if args.logits:
            top = logits.topk(5)
            print("top5:", [(int(i), tok.pieces[i], round(float(v), 4)) for v, i in zip(top.values, top.indices)],
                  file=sys.stderr)
        out = model.greedy([ids], args.n, EOS_ID)[0]
        print("gen ids:", out, file=sys.stderr)
        # Decode prompt+continuation together so spacing matches llama-simple's printout.
        print(tok.decode(ids + out))
    if args.test:
        rows = [json.loads(l) for l in open(args.test)]
        correct, outs = 0, []
        for i in range(0, len(rows), 50):
            chunk = rows[i:i + 50]
            gens = model.greedy([[BOS_ID] + tok.encode(r["question"]) for r in chunk], args.n, EOS_ID)
            for r, g in zip(chunk, gens):
                text = tok.decode(g)
                correct += scorers.is_correct(r.get("scorer", "gsm8k"), text, r["final"])
                outs.append(dict(r, output=text))
        print(f"{correct}/{len(rows)} correct = {100.0 * correct / len(rows):.1f}%")
        if args.out:
            with open(args.out, "w") as f:
                for o in outs:
                    f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()
