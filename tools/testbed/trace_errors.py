"""Where a model fails on program tracing: the error rate per kind of program, from `klspec bench --outputs`.

  klspec bench --dataset data/testbed_trace_test.jsonl -n 384 -np 4 --outputs /tmp/trace.jsonl
  python3 tools/testbed/trace_errors.py data/testbed_trace_test.jsonl /tmp/trace.jsonl [--show 3]

A program's kind is the first construct it uses, in this order: def, for, while, if, list; else straight
(assignments only). --show prints that many wrong answers of each kind beside the gold trace.
"""
import argparse
import collections
import json

KINDS = [("def", "def "), ("for", "for "), ("while", "while "), ("if", "if "), ("list", "[")]


def kind(question):
    code = question.split("\n", 1)[1]
    return next((name for name, token in KINDS if token in code), "straight")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("outputs", help="klspec bench --outputs FILE.jsonl (rows carry the dataset's index)")
    parser.add_argument("--show", type=int, default=0)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.dataset)]
    outputs = [json.loads(line) for line in open(args.outputs)]
    total, wrong, examples = collections.Counter(), collections.Counter(), collections.defaultdict(list)
    for output in outputs:
        row = rows[output["index"]]
        k = kind(row["question"])
        total[k] += 1
        if not output["correct"]:
            wrong[k] += 1
            examples[k].append((row, output))
    print("| kind | problems | wrong |\n|---|---|---|")
    for k in sorted(total, key=lambda k: -wrong[k] / total[k]):
        print(f"| {k} | {total[k]} | {wrong[k]} ({100 * wrong[k] / total[k]:.0f} %) |")
    for k, cases in examples.items():
        for row, output in cases[:args.show]:
            print(f"\n[{k}] {row['question']}\n  gold: {row['answer']}\n  got:  {output['text'].strip()}")


if __name__ == "__main__":
    main()
