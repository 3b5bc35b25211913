"""Export a train.py checkpoint to an F32 (or --f16) GGUF that stock llama.cpp loads (architecture `llama`).

  PYTHONPATH=<llama.cpp cache>/src/gguf-py /usr/bin/python3 export_gguf.py CKPT.pt OUT.gguf [--f16]

With --f16 the matrices are stored as F16 and the norm gains stay F32 (llama.cpp's convention).

The tokenizer (tok512: tokens, scores, token types, BOS/EOS/UNK ids) is copied from stories260K.gguf,
the same vocabulary train.py tokenizes with. Q/K weights need no permutation: model.py rotates
adjacent pairs, which is what llama.cpp's llama arch ("normal" rope) does on GGUF weights. The output
projection is tied to token_embd; llama.cpp falls back to token_embd when output.weight is absent.
"""
import argparse
import os
import sys

import numpy as np
import torch
from gguf import GGUFReader, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tok512 import STORIES_DIR  # noqa: E402  (<repo>/../shared/models/stories260K)

VOCAB_GGUF = os.environ.get("KLSPEC_VOCAB_GGUF", os.path.join(STORIES_DIR, "stories260K.gguf"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--name", default=None, help="general.name (default: the checkpoint's run name)")
    ap.add_argument("--f16", action="store_true", help="store the weight matrices as F16")
    args = ap.parse_args()

    ck = torch.load(args.ckpt, map_location="cpu")
    c, sd = ck["config"], ck["model"]
    vocab = GGUFReader(VOCAB_GGUF).fields

    w = GGUFWriter(args.out, "llama")
    w.add_name(args.name or ck.get("args", {}).get("run", "klspec-reasoning"))
    w.add_context_length(c["max_seq_len"])
    w.add_embedding_length(c["dim"])
    w.add_block_count(c["n_layers"])
    w.add_feed_forward_length(c["hidden_dim"])
    w.add_head_count(c["n_heads"])
    w.add_head_count_kv(c["n_kv_heads"])
    w.add_rope_dimension_count(c["dim"] // c["n_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["norm_eps"])
    w.add_file_type(1 if args.f16 else 0)  # 1 = mostly F16, 0 = all F32

    w.add_tokenizer_model(vocab["tokenizer.ggml.model"].contents())
    w.add_token_list(vocab["tokenizer.ggml.tokens"].contents())
    w.add_token_scores(vocab["tokenizer.ggml.scores"].contents())
    w.add_token_types(vocab["tokenizer.ggml.token_type"].contents())
    w.add_unk_token_id(vocab["tokenizer.ggml.unknown_token_id"].contents())
    w.add_bos_token_id(vocab["tokenizer.ggml.bos_token_id"].contents())
    w.add_eos_token_id(vocab["tokenizer.ggml.eos_token_id"].contents())

    def put(name, t):
        a = t.detach().float().numpy()
        w.add_tensor(name, a.astype(np.float16 if args.f16 and a.ndim == 2 else np.float32))

    put("token_embd.weight", sd["tok_emb.weight"])
    put("output_norm.weight", sd["norm.weight"])
    names = {"attn_norm.weight": "attn_norm", "wq.weight": "attn_q", "wk.weight": "attn_k",
             "wv.weight": "attn_v", "wo.weight": "attn_output", "ffn_norm.weight": "ffn_norm",
             "w1.weight": "ffn_gate", "w3.weight": "ffn_up", "w2.weight": "ffn_down"}
    for i in range(c["n_layers"]):
        for ours, theirs in names.items():
            put(f"blk.{i}.{theirs}.weight", sd[f"layers.{i}.{ours}"])

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: {sum(p.numel() for p in sd.values())} params, step {ck['step']}, "
          f"{ck['tokens_seen']} tokens seen", file=sys.stderr)


if __name__ == "__main__":
    main()
