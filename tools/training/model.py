"""A minimal Llama in PyTorch whose weights map 1:1 onto llama.cpp's `llama` GGUF architecture.

RMSNorm, SwiGLU, grouped-query attention, tied input/output embeddings, and RoPE on *adjacent* pairs
(x[2i], x[2i+1]) as in Meta's original code and llama2.c: that is llama.cpp's "normal" rope for the
llama arch, so Q/K weights export without the HF permutation.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    dim: int = 192
    n_layers: int = 6
    n_heads: int = 6
    n_kv_heads: int = 3
    hidden_dim: int = 512
    vocab_size: int = 512
    max_seq_len: int = 256
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self):
        return self.dim // self.n_heads


# Named sizes. The target/draft ratio must stay >= 8x in parameters (issue 4).
PRESETS = {
    "target": Config(dim=192, n_layers=6, n_heads=6, n_kv_heads=3, hidden_dim=512),        # 2.53 M
    "target-large": Config(dim=256, n_layers=6, n_heads=8, n_kv_heads=4, hidden_dim=688),  # 4.48 M
    "draft": Config(dim=96, n_layers=3, n_heads=4, n_kv_heads=2, hidden_dim=192),          # 0.30 M
    # Testbed v2 (tools/testbed, issue 7): problems up to ~300 tokens, so a 512-token context; head_dim 64.
    # tb-small is trained first and grown (tools/testbed/grow.py: residual width x2 by duplication,
    # heads and kv heads x2, FFN hidden x4, 4 identity-initialised layers) into tb-target.
    "tb-small": Config(dim=256, n_layers=6, n_heads=4, n_kv_heads=2, hidden_dim=512, max_seq_len=512),   # 3.7 M
    "tb-target": Config(dim=512, n_layers=10, n_heads=8, n_kv_heads=4, hidden_dim=2048, max_seq_len=512),  # 39.6 M
    "tb-draft": Config(dim=128, n_layers=3, n_heads=2, n_kv_heads=1, hidden_dim=320, max_seq_len=512),   # 0.5 M
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, pos, theta):
    """Rotate adjacent pairs of x (B, H, T, hd) by angle pos * theta^(-2i/hd); pos is (B, T)."""
    hd = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos[:, None, :, None].float() * inv_freq  # (B, 1, T, hd/2)
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.dim, c.norm_eps)
        self.wq = nn.Linear(c.dim, c.n_heads * hd, bias=False)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(c.n_heads * hd, c.dim, bias=False)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)
        self.w1 = nn.Linear(c.dim, c.hidden_dim, bias=False)  # gate
        self.w3 = nn.Linear(c.dim, c.hidden_dim, bias=False)  # up
        self.w2 = nn.Linear(c.hidden_dim, c.dim, bias=False)  # down

    def forward(self, x, pos, mask, cache):
        c, (B, T, _) = self.c, x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = rope(q, pos, c.rope_theta), rope(k, pos, c.rope_theta)
        if cache is not None:  # incremental decoding: append to this layer's keys/values
            if cache.get("k") is not None:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        rep = c.n_heads // c.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.wo((att @ v).transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.vocab_size, c.dim)  # also the output projection (tied)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.dim, c.norm_eps)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # Scaled-down residual projections, as in GPT-2/llama2.c, keep early training stable.
                std = 0.02 / math.sqrt(2 * c.n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, pos, mask, caches=None):
        """idx, pos: (B, T) token ids and positions; mask: (B, 1, T, T_keys) bool, True = may attend."""
        x = self.tok_emb(idx)
        for i, layer in enumerate(self.layers):
            x = layer(x, pos, mask, caches[i] if caches is not None else None)
        return self.norm(x) @ self.tok_emb.weight.t()

    def n_params(self):
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def greedy(self, prompts, max_new, eos_id):
        """Batched greedy continuation of token-id lists (left-padded, KV cache). Returns new ids per
        prompt, cut after EOS (the EOS itself is not included)."""
        B, Tp = len(prompts), max(len(p) for p in prompts)
        pad = torch.tensor([Tp - len(p) for p in prompts])
        idx = torch.tensor([[0] * (Tp - len(p)) + list(p) for p in prompts])
        pos = (torch.arange(Tp)[None, :] - pad[:, None]).clamp(min=0)
        key_ok = torch.arange(Tp)[None, :] >= pad[:, None]  # (B, Tk): False on padding
        causal = torch.ones(Tp, Tp, dtype=torch.bool).tril()
        mask = causal[None, None] & key_ok[:, None, None, :]
        # Padding queries attend to themselves: a fully masked row would softmax to NaN, and NaN
        # values poison real rows through 0 * NaN even where the mask gives them zero weight.
        mask |= torch.eye(Tp, dtype=torch.bool)
        caches = [{} for _ in self.layers]
        logits = self(idx, pos, mask, caches)[:, -1]
        out, done = [[] for _ in prompts], torch.zeros(B, dtype=torch.bool)
        next_pos = pos[:, -1] + 1
        for _ in range(max_new):
            nxt = logits.argmax(-1)
            for b in range(B):
                if not done[b]:
                    if nxt[b].item() == eos_id:
                        done[b] = True
                    else:
                        out[b].append(nxt[b].item())
            if bool(done.all()):
                break
            key_ok = torch.cat([key_ok, torch.ones(B, 1, dtype=torch.bool)], dim=1)
            logits = self(nxt[:, None], next_pos[:, None], key_ok[:, None, None, :], caches)[:, -1]
            next_pos = next_pos + 1
        return out


def config_dict(c: Config):
    return asdict(c)
