"""Gemma 3 (llama.cpp's `gemma3` graph, src/models/gemma3.cpp of the pinned tree) in PyTorch, over the
weights of a GGUF dequantized to float32 with gguf-py: for training a draft adapter on the target's own
hidden states (tools/real_model/train_adapter.py). Sequences up to the sliding window (512 tokens), so
every layer attends causally to the whole sequence; only the RoPE base differs between sliding-window
layers (10,000) and the global ones (every 6th: the model's rope.freq_base).

Layer by layer as llama.cpp computes it: x = embd · √n_embd; per layer h = x + post_attn_norm(attn(norm(x)))
with RMS-normed q and k, NeoX RoPE and q scaled by 1/√head_dim; x = h + post_ffw_norm(down(gelu(gate) · up));
logits = output_norm(x) · embdᵀ. GGUF norm weights already hold Gemma's (1 + w).
"""
import math

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize


class GgufWeights:
    """Float32 tensors of a GGUF by name (ggml's shape reversed: a {n_embd, n_vocab} tensor is [n_vocab, n_embd])."""

    def __init__(self, path):
        self.reader = GGUFReader(str(path))
        self.tensors = {t.name: t for t in self.reader.tensors}
        fields = self.reader.fields
        arch = fields["general.architecture"].contents()
        self.arch = arch
        self.n_layer = fields[f"{arch}.block_count"].contents()
        self.n_embd = fields[f"{arch}.embedding_length"].contents()
        self.n_head = fields[f"{arch}.attention.head_count"].contents()
        self.n_head_kv = fields[f"{arch}.attention.head_count_kv"].contents()
        self.head_dim = fields[f"{arch}.attention.key_length"].contents()
        self.eps = fields[f"{arch}.attention.layer_norm_rms_epsilon"].contents()
        self.rope_base = fields[f"{arch}.rope.freq_base"].contents()

    def __call__(self, name):
        t = self.tensors[name]
        # A copy: an F32 tensor dequantizes to a read-only view of the mapped file, which training must not write.
        return torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32, copy=True))


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_neox(x, positions, base):
    """x: [T, heads, d]; rotates the two halves of each head (ggml's NeoX mode)."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions[:, None].float() * inv[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Gemma3Layer(torch.nn.Module):
    NAMES = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output",
             "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm"]

    def __init__(self, weights, index, trainable=False):
        super().__init__()
        self.index = index
        self.eps, self.n_head, self.n_head_kv, self.head_dim = weights.eps, weights.n_head, weights.n_head_kv, weights.head_dim
        self.rope_base = weights.rope_base if index % 6 == 5 else 10000.0  # every 6th layer is global
        self.w = torch.nn.ParameterDict({n: torch.nn.Parameter(weights(f"blk.{index}.{n}.weight"), requires_grad=trainable)
                                         for n in self.NAMES})

    def forward(self, x):
        w, T = self.w, x.shape[0]
        positions = torch.arange(T)
        h = rms_norm(x, w["attn_norm"], self.eps)
        q = (h @ w["attn_q"].T).view(T, self.n_head, self.head_dim)
        k = (h @ w["attn_k"].T).view(T, self.n_head_kv, self.head_dim)
        v = (h @ w["attn_v"].T).view(T, self.n_head_kv, self.head_dim)
        q = rope_neox(rms_norm(q, w["attn_q_norm"], self.eps), positions, self.rope_base) / math.sqrt(self.head_dim)
        k = rope_neox(rms_norm(k, w["attn_k_norm"], self.eps), positions, self.rope_base)
        groups = self.n_head // self.n_head_kv
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k)
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(T, -1)
        x = x + rms_norm(attn @ w["attn_output"].T, w["post_attention_norm"], self.eps)
        h = rms_norm(x, w["ffn_norm"], self.eps)
        f = torch.nn.functional.gelu(h @ w["ffn_gate"].T, approximate="tanh") * (h @ w["ffn_up"].T)
        return x + rms_norm(f @ w["ffn_down"].T, w["post_ffw_norm"], self.eps)


class Gemma3(torch.nn.Module):
    """The first `layers` layers (all by default), frozen; `hidden(tokens, upto)` is the residual after layer upto-1."""

    def __init__(self, weights, layers=None):
        super().__init__()
        self.weights = weights
        self.embd = weights("token_embd.weight")  # [n_vocab, n_embd], tied output head
        self.output_norm = weights("output_norm.weight")
        self.layers = torch.nn.ModuleList(Gemma3Layer(weights, i) for i in range(layers or weights.n_layer))

    def residual(self, tokens, upto=None):
        x = self.embd[tokens] * math.sqrt(self.weights.n_embd)
        for layer in self.layers[:upto]:
            x = layer(x)
        return x

    def normed(self, x):
        return rms_norm(x, self.output_norm, self.weights.eps)

    def logits(self, normed):
        return normed @ self.embd.T
