"""Function-preserving growth of a trained Llama (model.py) into a wider and deeper one (Net2Net-style).

  /usr/bin/python3 grow.py SMALL_CKPT.pt OUT.pt [--to tb-target] [--seed 0]

then fine-tune every weight with train.py --init OUT.pt (see README.md). The grown model computes the
same logits as the small one (up to float rounding; test_grow.py checks it):

* Residual width x k (k = big.dim / small.dim, an integer): the residual stream becomes k copies of
  the old one, x' = [x, x, ...]. RMSNorm of k copies is k copies of RMSNorm, so the norm gains are
  tiled. The token embedding's columns are tiled (the input is k copies); the final norm gain is
  divided by k, because the tied output projection sums the k copies' identical contributions.
* Heads x k with the same head_dim, kv heads x k: new head h copies old head h mod H; grouped-query
  attention then maps every new head to the copy of its old kv head (checked in test_grow.py).
* FFN hidden x m (any integer): hidden unit u copies old unit u mod F.
* Every matrix that reads a widened input splits each old weight over the copies of its input with
  random positive fractions that sum to 1 (W'[r, c*n + j] = W[r mod R, j] * s_c); matrices that write
  a widened output repeat their rows. The sums are unchanged, so the function is; but the copies get
  different gradients, which breaks the symmetry of plain duplication, so fine-tuning can make the
  copies diverge and every weight learns.
* Extra layers are identity-initialised and spread evenly between the old ones: their output
  projections (attention wo, FFN w2) are zero, so the residual branch adds nothing; their other
  matrices are random (std 0.02) and their norms 1, so gradients reach them from the first step.
"""
import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: see training/train.py
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "training"))
from model import PRESETS, Config, Llama, config_dict  # noqa: E402


def _check(cs: Config, cb: Config):
    k = cb.dim // cs.dim
    problems = []
    if cb.dim != k * cs.dim or k < 1:
        problems.append("big dim must be an integer multiple of small dim")
    if cb.head_dim != cs.head_dim:
        problems.append("head_dim must stay the same")
    if cb.n_heads != k * cs.n_heads or cb.n_kv_heads != k * cs.n_kv_heads:
        problems.append("heads and kv heads must grow by the width factor")
    if cb.hidden_dim % cs.hidden_dim:
        problems.append("FFN hidden size must be an integer multiple")
    if cb.n_layers < cs.n_layers:
        problems.append("cannot remove layers")
    for f in ("vocab_size", "norm_eps", "rope_theta"):
        if getattr(cb, f) != getattr(cs, f):
            problems.append(f"{f} must match")
    if problems:
        raise ValueError("cannot grow %s into %s: %s" % (config_dict(cs), config_dict(cb), "; ".join(problems)))
    return k, cb.hidden_dim // cs.hidden_dim


def _split(gen, rows, k):
    """(rows, k) random positive fractions summing to 1 over k copies."""
    s = torch.rand(rows, k, generator=gen) + 0.5
    return s / s.sum(1, keepdim=True)


def _widen(W, out_factor, in_factor, gen):
    """W (R, C) -> (out_factor*R, in_factor*C): rows repeated, each weight split over the copies of its
    input column with random fractions (independent per output row and input column)."""
    R, C = W.shape
    big = W.repeat(out_factor, in_factor)  # big[r, c*C + j] = W[r mod R, j]
    if in_factor > 1:
        s = _split(gen, out_factor * R * C, in_factor)  # (R' * C, k)
        s = s.view(out_factor * R, C, in_factor).permute(0, 2, 1).reshape(out_factor * R, in_factor * C)
        big = big * s
    return big


def grow(sd, cs: Config, cb: Config, seed=0):
    """State dict of a `cb` model that computes what the `cs` model with state dict `sd` computes."""
    k, m = _check(cs, cb)
    gen = torch.Generator().manual_seed(seed)
    out = {"tok_emb.weight": sd["tok_emb.weight"].repeat(1, k),
           "norm.weight": sd["norm.weight"].repeat(k) / k}
    # positions of the old layers among the new ones: new layers spread evenly between them
    n_new = cb.n_layers - cs.n_layers
    old_at = [i + (i + 1) * n_new // (cs.n_layers + 1) for i in range(cs.n_layers)]
    shapes = {n: t.shape for n, t in Llama(Config(**{**config_dict(cb), "n_layers": 1})).layers[0].state_dict().items()}
    src = 0
    for i in range(cb.n_layers):
        p = f"layers.{i}."
        if src < cs.n_layers and old_at[src] == i:
            q = f"layers.{src}."
            out[p + "attn_norm.weight"] = sd[q + "attn_norm.weight"].repeat(k)
            out[p + "ffn_norm.weight"] = sd[q + "ffn_norm.weight"].repeat(k)
            for name in ("wq", "wk", "wv"):  # heads x k, input residual x k
                out[p + name + ".weight"] = _widen(sd[q + name + ".weight"], k, k, gen)
            out[p + "wo.weight"] = _widen(sd[q + "wo.weight"], k, k, gen)  # residual x k, head input x k
            for name in ("w1", "w3"):  # hidden x m, input residual x k
                out[p + name + ".weight"] = _widen(sd[q + name + ".weight"], m, k, gen)
            out[p + "w2.weight"] = _widen(sd[q + "w2.weight"], k, m, gen)  # residual x k, hidden input x m
            src += 1
        else:  # identity layer: zero output projections, random inputs, unit norms
            for name, shape in shapes.items():
                if name.endswith("norm.weight"):
                    out[p + name] = torch.ones(shape)
                elif name in ("wo.weight", "w2.weight"):
                    out[p + name] = torch.zeros(shape)
                else:
                    out[p + name] = torch.randn(shape, generator=gen) * 0.02
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("small")
    ap.add_argument("out")
    ap.add_argument("--to", default="tb-target", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ck = torch.load(args.small, map_location="cpu")
    cs, cb = Config(**ck["config"]), PRESETS[args.to]
    sd = grow(ck["model"], cs, cb, args.seed)
    big = Llama(cb)
    big.load_state_dict(sd)  # strict: every tensor present with the right shape
    # check on one sequence that the function is preserved
    small = Llama(cs)
    small.load_state_dict(ck["model"])
    T = 32
    x = torch.randint(3, cs.vocab_size, (1, T), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
    with torch.no_grad():
        diff = (small(x, torch.arange(T)[None], mask) - big(x, torch.arange(T)[None], mask)).abs().max().item()
    tmp = args.out + ".tmp"
    torch.save({"model": sd, "config": config_dict(cb), "preset": args.to, "grown_from": os.path.abspath(args.small),
                "grown_from_config": ck["config"], "step": ck.get("step", 0), "tokens_seen": ck.get("tokens_seen", 0),
                "args": {"run": os.path.basename(args.out), "tasks": ck.get("args", {}).get("tasks")}}, tmp)
    os.replace(tmp, args.out)
    print(f"grew {small.n_params():,} -> {big.n_params():,} params ({args.to}); max |logit diff| on a "
          f"32-token check {diff:.2e}; wrote {args.out}")


if __name__ == "__main__":
    main()
