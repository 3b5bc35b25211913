"""Command line of the testbed v2 task generator (families.py) and scorers (scorers.py).

  taskgen.py sample [--family F] [-n N] [--split S] [--seed K]   print problems (question + gold answer)
  taskgen.py write-test [--n 300] [--out-dir data] [--split S]   data/testbed_<family>_<S>.jsonl (S: test)
  taskgen.py score PRED.jsonl [--field output]                   accuracy per family of rows with
                                                                 family/scorer/final/<field>

Rows are JSON objects: question (the prompt, ending in "\\nA:"), answer (a gold solution), final
(the gold final answer: an integer for word, a letter A-J for choice, the printed text for trace),
family, scorer.
"""
import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import families  # noqa: E402
import scorers  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--family", choices=families.FAMILIES, default=None)
    s.add_argument("-n", type=int, default=3)
    s.add_argument("--split", default="train", choices=sorted(families.SPLIT_SEED))
    s.add_argument("--seed", type=int, default=0)
    w = sub.add_parser("write-test")
    w.add_argument("--n", type=int, default=300, help="problems per family")
    w.add_argument("--out-dir", default=os.path.join(REPO, "data"))
    w.add_argument("--split", default="test", choices=sorted(families.SPLIT_SEED),
                   help="validation: problems to calibrate thresholds on without touching the test split")
    sc = sub.add_parser("score")
    sc.add_argument("preds")
    sc.add_argument("--field", default="output")
    args = ap.parse_args(argv)

    if args.cmd == "sample":
        fams = [args.family] if args.family else list(families.FAMILIES)
        for row in families.take(args.split, args.n, seed=args.seed, families=fams):
            print(f"[{row['family']}, {row['scorer']}, final {row['final']!r}]")
            print(row["question"] + " " + row["answer"] + "\n")
    elif args.cmd == "write-test":
        for fam in families.FAMILIES:
            path = os.path.join(args.out_dir, f"testbed_{fam}_{args.split}.jsonl")
            with open(path, "w") as f:
                for row in families.take(args.split, args.n, families=[fam]):
                    f.write(json.dumps(row) + "\n")
            print(f"wrote {path}: {args.n} problems")
    elif args.cmd == "score":
        ok, n = collections.Counter(), collections.Counter()
        for line in open(args.preds):
            r = json.loads(line)
            n[r["family"]] += 1
            ok[r["family"]] += scorers.is_correct(r["scorer"], r[args.field], r["final"])
        for fam in sorted(n):
            print(f"{fam}: {ok[fam]}/{n[fam]} = {100.0 * ok[fam] / n[fam]:.1f} %")


if __name__ == "__main__":
    main()
