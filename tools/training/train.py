"""Train a small Llama on generated problems (tok512 tokens), resumably.

  /usr/bin/python3 train.py --run tb-small-v1 --preset tb-small        # the testbed v2 families
  /usr/bin/python3 train.py --run tb-target-v1 --init grown.pt         # start from a grown model

Re-running the same command resumes from ~/.cache/klspec/train/<run>/ckpt.pt. Every --eval-every
tokens it measures greedy accuracy on validation problems and appends a row to
tools/testbed/curves/<run>.curve.csv in the repository.

Batches: whole problems ("<s> Q: ... A: ... The answer is N.</s>") packed into rows of --seq-len
tokens (first fit from a small pool of pending problems, ~95% full); attention is block-diagonal per problem and positions restart at 0 for each problem, so
training sees exactly what llama.cpp sees at inference (BOS at position 0, nothing before it).
The problems of step s come from a generator seeded by (run seed, s), so resuming needs no data state.
"""
import argparse
import csv
import os
import random
import sys
import time

# Debian's torch multiplies matrices with OpenBLAS, whose own thread pool ignores
# torch.set_num_threads: pin it before torch loads so training really uses one core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tasks  # noqa: E402
from model import PRESETS, Config, Llama, config_dict  # noqa: E402
from tok512 import BOS_ID, EOS_ID, Tok512  # noqa: E402

IGNORE = -100


def encode_problem(tok, question, answer):
    """(ids, n_prompt): BOS + question (with SentencePiece's dummy prefix, as llama.cpp tokenizes a
    prompt) + answer (continuing after "A:", so no second prefix) + EOS."""
    q = [BOS_ID] + tok.encode(question)
    return q + tok.encode(" " + answer, add_prefix_space=False) + [EOS_ID], len(q)


def make_batch(tok, source, seed, step, batch_size, seq_len, answer_only):
    """Rows of packed whole problems. Returns idx, targets, pos, mask, answer_targets."""
    gen = source.train_stream(f"{seed}:{step}")
    idx = torch.zeros(batch_size, seq_len, dtype=torch.long)
    tgt = torch.full((batch_size, seq_len), IGNORE, dtype=torch.long)
    ans = torch.full((batch_size, seq_len), IGNORE, dtype=torch.long)
    pos = torch.zeros(batch_size, seq_len, dtype=torch.long)
    doc = torch.full((batch_size, seq_len), -1, dtype=torch.long)
    pool = []  # encoded problems waiting for a row with room; the oldest always starts a new row
    for b in range(batch_size):
        t, d = 0, 0
        while True:
            fit = next((p for p in pool if t + len(p[0]) <= seq_len), None)
            if fit is None and len(pool) < 8:
                q, a = next(gen)
                enc = encode_problem(tok, q, a)
                if len(enc[0]) <= seq_len:  # a problem longer than a row could never be placed
                    pool.append(enc)
                continue
            if fit is None:
                break
            pool.remove(fit)
            ids, n_prompt = fit
            L = len(ids)
            idx[b, t:t + L] = torch.tensor(ids)
            tgt[b, t:t + L - 1] = torch.tensor(ids[1:])
            ans[b, t + n_prompt - 1:t + L - 1] = torch.tensor(ids[n_prompt:])  # answer tokens only
            pos[b, t:t + L] = torch.arange(L)
            doc[b, t:t + L] = d
            t, d = t + L, d + 1
    same_doc = (doc[:, :, None] == doc[:, None, :]) & (doc[:, :, None] >= 0)
    mask = (same_doc & torch.ones(seq_len, seq_len, dtype=torch.bool).tril())[:, None]
    mask |= torch.eye(seq_len, dtype=torch.bool)  # padding rows attend to themselves (no NaN)
    return idx, (ans if answer_only else tgt), pos, mask, ans


@torch.no_grad()
def evaluate(model, tok, source, rows, max_new=96, batch=50):
    """On problem rows (question, answer, final, family): greedy accuracy overall and per family, the
    mean answer-token loss on the gold answers, and the fraction of gold answer-token positions where
    the model's top probability is <= 0.9 (where a relaxed judge can act)."""
    model.eval()
    correct, n_fam, loss_sum, n_tok, n_unsure = {}, {}, 0.0, 0, 0
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        prompts = [[BOS_ID] + tok.encode(r["question"]) for r in chunk]
        for out, r in zip(model.greedy(prompts, max_new, EOS_ID), chunk):
            fam = r["family"]
            correct[fam] = correct.get(fam, 0) + bool(source.is_correct(tok.decode(out), r))
            n_fam[fam] = n_fam.get(fam, 0) + 1
        for r in chunk:
            ids, n_prompt = encode_problem(tok, r["question"], r["answer"])
            x = torch.tensor([ids[:-1]])
            T = x.shape[1]
            logits = model(x, torch.arange(T)[None], torch.ones(T, T, dtype=torch.bool).tril()[None, None])
            ans = logits[0, n_prompt - 1:]
            loss_sum += F.cross_entropy(ans, torch.tensor(ids[n_prompt:]), reduction="sum").item()
            n_unsure += int((ans.softmax(-1).max(-1).values <= 0.9).sum())
            n_tok += len(ids) - n_prompt
    model.train()
    acc = {f: correct[f] / n_fam[f] for f in n_fam}
    return {"acc": sum(correct.values()) / len(rows), "family_acc": acc, "answer_loss": loss_sum / n_tok,
            "unsure": n_unsure / n_tok}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run name: checkpoint dir and curve file name")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="target")
    ap.add_argument("--tasks", choices=["testbed"], default="testbed",
                    help="problem source: the testbed v2 families (the v1 pair's `reasoning` was removed; "
                         "git show b46041d:tools/training/tasks.py)")
    ap.add_argument("--mix", default=None, help="testbed family weights per problem, e.g. word=2,choice=1,trace=1")
    ap.add_argument("--style-lean", type=float, default=0.0, metavar="P",
                    help="testbed: training answers use each phrasing table's last form, or write an optional "
                         "part, with probability P, else the uniform draw (a draft's house style; see "
                         "families.Style). Default 0")
    ap.add_argument("--init", default=None, metavar="CKPT",
                    help="start a new run from this checkpoint's weights and config (e.g. a grown model); "
                         "ignored when the run already has a checkpoint; --preset is then not used")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=200)
    ap.add_argument("--decay-from", type=float, default=None, metavar="TOKENS",
                    help="with --decay-to: decay lr linearly to 10%% between these token counts "
                         "(the run is open-ended, so the schedule is chosen on a later resume)")
    ap.add_argument("--decay-to", type=float, default=None, metavar="TOKENS")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--loss", choices=["all", "answer"], default="all",
                    help="train on every token, or only on answer tokens (after 'A:')")
    ap.add_argument("--max-tokens", type=float, default=1e12, help="stop after this many tokens seen")
    ap.add_argument("--eval-every", type=float, default=1e6, help="tokens between validation evals")
    ap.add_argument("--eval-problems", type=int, default=200)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=1,
                    help="1 leaves the other core for builds or a second run; 2 for the grown target (with --bf16)")
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 autocast for the training forward pass (weights, gradients and AdamW stay "
                         "float32): the grown target trains at ~900 instead of ~300 tokens/s on 2 AVX512-BF16 threads; "
                         "evals stay float32")
    ap.add_argument("--ckpt-root", default=os.path.expanduser("~/.cache/klspec/train"))
    ap.add_argument("--curve-dir", default=None,
                    help="where <run>.curve.csv goes (default: tools/testbed/curves)")
    args = ap.parse_args()
    if args.curve_dir is None:
        args.curve_dir = os.path.join(REPO, "tools", "testbed", "curves")
    if not 0.0 <= args.style_lean <= 1.0:
        ap.error("--style-lean must be in [0, 1]")
    source = tasks.get(args.tasks, args.mix, args.style_lean)

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    run_dir = os.path.join(args.ckpt_root, args.run)
    os.makedirs(run_dir, exist_ok=True)
    os.makedirs(args.curve_dir, exist_ok=True)
    ckpt_path = os.path.join(run_dir, "ckpt.pt")
    curve_path = os.path.join(args.curve_dir, f"{args.run}.curve.csv")
    log = open(os.path.join(run_dir, "log.txt"), "a", buffering=1)

    def say(msg):
        line = time.strftime("%H:%M:%S ") + msg
        print(line, flush=True)
        log.write(line + "\n")

    tok = Tok512()
    init = None
    if args.init and not os.path.exists(ckpt_path):
        init = torch.load(args.init, map_location="cpu")
        config = Config(**init["config"])
    elif args.init:
        config = Config(**torch.load(ckpt_path, map_location="cpu")["config"])
    else:
        config = PRESETS[args.preset]
    torch.manual_seed(args.seed)
    model = Llama(config)
    if init is not None:
        model.load_state_dict(init["model"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    step, tokens_seen, wall, next_eval = 0, 0, 0.0, 0
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        if ck.get("args", {}).get("tasks", "reasoning") != args.tasks:
            sys.exit(f"{ckpt_path} was trained with --tasks {ck['args'].get('tasks', 'reasoning')}, not {args.tasks}")
        if ck["config"] != config_dict(config):
            sys.exit(f"{ckpt_path} has config {ck['config']}, not preset {args.preset}")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, tokens_seen, wall, next_eval = ck["step"], ck["tokens_seen"], ck["wall"], ck["next_eval"]
        torch.set_rng_state(ck["torch_rng"])
        say(f"resumed {args.run} at step {step}, {tokens_seen} tokens, {wall:.0f} s")
    else:
        src = f"init {args.init}" if init is not None else args.preset
        say(f"new run {args.run}: {src} {config_dict(config)}, {model.n_params()} params, args {vars(args)}")

    val = source.validation(args.eval_problems)

    def eval_and_log():
        t0 = time.time()
        ev = evaluate(model, tok, source, val, max_new=source.max_new)
        new_file = not os.path.exists(curve_path)
        with open(curve_path, "a", newline="") as f:
            w = csv.writer(f)
            if new_file:
                w.writerow(["tokens_seen", "train_loss", "val_accuracy", "val_answer_loss", "wall_seconds", "step"]
                           + [f"acc_{fam}" for fam in source.families] + ["val_maxp_le_0.9"])
            w.writerow([tokens_seen, f"{loss_avg:.4f}" if loss_avg is not None else "",
                        f"{ev['acc']:.3f}", f"{ev['answer_loss']:.4f}", f"{wall:.0f}", step]
                       + [f"{ev['family_acc'][fam]:.3f}" for fam in source.families] + [f"{ev['unsure']:.3f}"])
        fams = " ".join(f"{k} {v:.3f}" for k, v in ev["family_acc"].items())
        say(f"eval step {step} tokens {tokens_seen}: val acc {ev['acc']:.3f} {fams} answer loss "
            f"{ev['answer_loss']:.4f} max p <= 0.9 on {ev['unsure']:.3f} ({time.time() - t0:.0f} s)")

    def save():
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "tokens_seen": tokens_seen, "wall": wall, "next_eval": next_eval,
                    "torch_rng": torch.get_rng_state(), "config": config_dict(config),
                    "preset": args.preset, "args": vars(args)}, tmp)
        os.replace(tmp, ckpt_path)  # atomic: a kill mid-save never leaves a broken checkpoint

    last_save, loss_avg, t_win, tok_win = time.time(), None, time.time(), 0
    # wall (the curve's wall_seconds) counts training time only, not evals or checkpointing
    while tokens_seen < args.max_tokens:
        t0 = time.time()
        if tokens_seen >= next_eval:
            eval_and_log()
            next_eval = tokens_seen + args.eval_every
            t0 = t_win = time.time()  # the logged tok/s measures training, not the eval
            tok_win = 0

        lr = args.lr * min(1.0, (step + 1) / args.warmup_steps)
        if args.decay_from is not None and tokens_seen > args.decay_from:
            frac = min(1.0, (tokens_seen - args.decay_from) / (args.decay_to - args.decay_from))
            lr *= 1.0 - 0.9 * frac
            if frac >= 1.0:
                break  # schedule finished
        for g in opt.param_groups:
            g["lr"] = lr
        idx, tgt, pos, mask, _ = make_batch(tok, source, args.seed, step, args.batch_size, args.seq_len,
                                            args.loss == "answer")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(idx, pos, mask)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        n = int((idx != 0).sum())  # real (non-padding) tokens
        tokens_seen += n
        tok_win += n
        loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
        wall += time.time() - t0
        if step % 50 == 0:
            say(f"step {step} tokens {tokens_seen} loss {loss_avg:.4f} lr {lr:.2e} {tok_win / (time.time() - t_win):.0f} tok/s")
            t_win, tok_win = time.time(), 0
        if time.time() - last_save > args.ckpt_minutes * 60:
            save()
            last_save = time.time()
    eval_and_log()
    save()
    say("done")


if __name__ == "__main__":
    main()
