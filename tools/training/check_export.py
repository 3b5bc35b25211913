"""Check a GGUF export against its checkpoint: greedy answers of llama-simple vs PyTorch on test problems.

  /usr/bin/python3 check_export.py CKPT.pt MODEL.gguf LLAMA_SIMPLE [--test data/testbed_word_test.jsonl] [-k 100]

Prints how many continuations are identical and the accuracy of each side (each row scored with its `scorer`
field's scorer, tools/testbed/scorers.py; gsm8k's where it has none).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testbed"))
import scorers  # noqa: E402
from evaluate import load  # noqa: E402  (also pins OpenBLAS to one thread)
from tok512 import BOS_ID, EOS_ID, Tok512  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("gguf")
    ap.add_argument("llama_simple")
    ap.add_argument("--test", default=os.path.join(HERE, "..", "..", "data", "testbed_word_test.jsonl"))
    ap.add_argument("-k", type=int, default=100, help="number of test problems")
    ap.add_argument("-n", type=int, default=320, help="max new tokens")
    args = ap.parse_args()
    tok, model = Tok512(), load(args.ckpt)
    rows = [json.loads(l) for l in open(args.test)][:args.k]
    same = ok_torch = ok_cpp = 0
    for i in range(0, len(rows), 50):
        chunk = rows[i:i + 50]
        gens = model.greedy([[BOS_ID] + tok.encode(r["question"]) for r in chunk], args.n, EOS_ID)
        for r, g in zip(chunk, gens):
            ours = tok.decode([BOS_ID] + tok.encode(r["question"]) + g)
            out = subprocess.run([args.llama_simple, "-m", args.gguf, "-n", str(args.n), r["question"]],
                                 capture_output=True, text=True).stdout
            theirs = out.removeprefix("<s> ").rstrip("\n")  # llama-simple prints BOS and ends with \n
            same += ours == theirs
            if ours != theirs:
                print("DIFF\n torch: %r\n llama: %r" % (ours, theirs))
            answer = lambda text: text[len(r["question"]):]
            scorer = r.get("scorer", "gsm8k")
            ok_torch += scorers.is_correct(scorer, answer(ours), r["final"])
            ok_cpp += scorers.is_correct(scorer, answer(theirs), r["final"])
    print(f"identical continuations {same}/{len(rows)}; accuracy torch {ok_torch}/{len(rows)}, "
          f"llama.cpp {ok_cpp}/{len(rows)}")


if __name__ == "__main__":
    main()
