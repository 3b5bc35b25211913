"""PyTorch estimate of the issue-7 pair statistics, per family, from two train.py checkpoints:

  /usr/bin/python3 pair_stats.py TARGET.pt DRAFT.pt [--family word choice trace] [-k 100] [--gammas 4 8 16]

* target and draft greedy accuracy on the first k problems of data/testbed_<family>_test.jsonl;
* vanilla greedy speculative decoding simulated exactly: with greedy verification the output is the
  target's greedy text, and the draft's proposals at a block start are its greedy continuation of that
  text, so one teacher-forced draft pass over the target's output gives, for every position, whether the
  draft proposes the target's token; a block accepts the run of matches (at most gamma) and emits one more
  target token. Reports acceptance = accepted / drafted (gamma per block, fewer at the end) and MAT =
  emitted / target calls. (`klspec bench` measures the same on the GGUFs; use it for reported numbers.)
* the fraction of the target's own answer-token positions where its top probability is <= 0.9;
* where the draft's greedy token differs from the target's: mismatches per problem, split into digit
  positions (either token a digit: mostly arithmetic errors, where a judge must not relax) and text
  positions (mostly harmless phrasing), with the median KL(p || q) of each and the share the paper's rule
  would relax at tau 0.5 (max p <= 0.9 and KL < 0.5).

One core, like training.
"""
import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "training"))
import scorers  # noqa: E402
from evaluate import load  # noqa: E402
from tok512 import BOS_ID, EOS_ID, Tok512  # noqa: E402


def simulate(match, gamma):
    """match[i]: the draft's greedy token at answer position i equals the target's. Returns
    (accepted, drafted, emitted, calls) of greedy speculative decoding with draft length gamma."""
    pos, acc, drafted, emitted, calls, L = 0, 0, 0, 0, 0, len(match)
    while pos < L:
        g = min(gamma, L - pos)
        k = 0
        while k < g and match[pos + k]:
            k += 1
        acc, drafted, calls = acc + k, drafted + g, calls + 1
        emitted += min(k + 1, L - pos)
        pos += k + 1
    return acc, drafted, emitted, calls


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--family", nargs="+", default=["word", "choice", "trace"])
    ap.add_argument("-k", type=int, default=100, help="problems per family")
    ap.add_argument("-n", type=int, default=320, help="max new tokens (the longest gold answers are ~310)")
    ap.add_argument("--gammas", type=int, nargs="+", default=[4, 8, 16])
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok, target, draft = Tok512(), load(args.target), load(args.draft)
    for fam in args.family:
        with open(os.path.join(REPO, "data", f"testbed_{fam}_test.jsonl")) as f:
            rows = [json.loads(line) for line in f][:args.k]
        ok_t = ok_d = unsure = n_ans = 0
        mismatch = {"digit": [], "text": []}  # (KL, relaxable at tau 0.5) per mismatch
        sums = {g: [0, 0, 0, 0] for g in args.gammas}
        for i in range(0, len(rows), 25):
            chunk = rows[i:i + 25]
            prompts = [[BOS_ID] + tok.encode(r["question"]) for r in chunk]
            outs_t = target.greedy(prompts, args.n, EOS_ID)
            outs_d = draft.greedy(prompts, args.n, EOS_ID)
            for r, p, ot, od in zip(chunk, prompts, outs_t, outs_d):
                ok_t += scorers.is_correct(r["scorer"], tok.decode(ot), r["final"])
                ok_d += scorers.is_correct(r["scorer"], tok.decode(od), r["final"])
                seq = p + ot + ([EOS_ID] if len(ot) < args.n else [])  # the target's output incl. its EOS
                T = len(seq) - 1
                mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
                x, pos = torch.tensor([seq[:-1]]), torch.arange(T)[None]
                lt = target(x, pos, mask)[0, len(p) - 1:].log_softmax(-1)
                ld = draft(x, pos, mask)[0, len(p) - 1:].log_softmax(-1)
                gold = torch.tensor(seq[len(p):])
                maxp = lt.exp().max(-1).values
                unsure += int((maxp <= 0.9).sum())
                n_ans += len(gold)
                proposed = ld.argmax(-1)
                match = (proposed == gold).tolist()
                kl = (lt.exp() * (lt - ld)).sum(-1)
                for j in (proposed != gold).nonzero().flatten().tolist():
                    kind = "digit" if is_digit(tok, gold[j]) or is_digit(tok, proposed[j]) else "text"
                    mismatch[kind].append((float(kl[j]), bool(maxp[j] <= 0.9 and kl[j] < 0.5)))
                for g in args.gammas:
                    for j, v in enumerate(simulate(match, g)):
                        sums[g][j] += v
        n = len(rows)
        accs = " ".join(f"g{g} acc {100.0 * s[0] / s[1]:.1f} % MAT {s[2] / s[3]:.2f}" for g, s in sums.items())
        print(f"{fam}: target {ok_t}/{n} = {100.0 * ok_t / n:.1f} %, draft {ok_d}/{n} = {100.0 * ok_d / n:.1f} %; "
              f"{accs}; target max p <= 0.9 on {100.0 * unsure / max(1, n_ans):.1f} % of its answer tokens",
              flush=True)
        parts = [f"{kind} {len(m) / n:.1f} (median KL {statistics.median(k for k, _ in m):.2f}, "
                 f"{100.0 * sum(r for _, r in m) / len(m):.0f} % relaxable at kl 0.5)" for kind, m in mismatch.items() if m]
        print(f"{fam}: mismatches per problem: " + ", ".join(parts), flush=True)


def is_digit(tok, token_id):
    return tok.decode([int(token_id)]).strip().isdigit() if int(token_id) != EOS_ID else False


if __name__ == "__main__":
    main()
