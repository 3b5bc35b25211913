"""Write a draft whose output head scores only N tokens (FR-Spec's reduced vocabulary, arXiv 2502.14856): the
rows of the output matrix (and of the tied embedding) for the N first ids of a ranking, in that order, and the
tokenizer's arrays cut to the same N, so that llama.cpp loads it as a model with an N-token vocabulary.

  PYTHONPATH=<llama.cpp cache>/src/gguf-py /usr/bin/python3 tools/real_model/reduced_vocab.py \
      DRAFT.gguf RANKING.json --sizes 16384,32768 [--out-dir DIR]

RANKING.json is a JSON list of token ids, most frequent first. Writes DIR/<draft stem>-vocab<N>.gguf for each N
and prints one path a line. It is a cost probe: llama.cpp runs it at its real cost a token, but its token ids are
the ranking's positions, so klspec cannot decode with it as the draft of the full-vocabulary target (that needs
the draft's input fed as embeddings and its output ids mapped back, not built). Never commit the outputs.
"""
import argparse
import json
import sys
from pathlib import Path

import gguf
from gguf_copy import write_model

HEAD_TENSORS = ("token_embd.weight", "output.weight")
VOCAB_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores")
SPECIAL_IDS = ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
               "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id")


def write_reduced(reader, ranking, n, out_path):
    kept = ranking[:n]
    position = {token: i for i, token in enumerate(kept)}

    def changed(name, value):
        if name in VOCAB_ARRAYS:
            return [value[t] for t in kept]
        if name in SPECIAL_IDS:
            return position.get(value, n - 1)  # a special token outside the N: any id of the N loads
        return value

    tensors = [(t.name, t.data[kept] if t.name in HEAD_TENSORS else t.data, t.tensor_type) for t in reader.tensors]
    write_model(reader, out_path, changed, tensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("draft")
    ap.add_argument("ranking")
    ap.add_argument("--sizes", required=True, help="comma-separated N values")
    ap.add_argument("--out-dir", help="where to write the drafts (default: beside the draft)")
    a = ap.parse_args()
    draft = Path(a.draft)
    if not draft.is_file():
        sys.exit(f"reduced_vocab: {draft}: no such file")
    try:
        ranking = json.loads(Path(a.ranking).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"reduced_vocab: {a.ranking}: {e}")
    reader = gguf.GGUFReader(str(draft))
    vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    if (not isinstance(ranking, list) or not all(isinstance(t, int) and 0 <= t < vocab for t in ranking)
            or len(set(ranking)) != len(ranking)):
        sys.exit(f"reduced_vocab: {a.ranking} must list distinct token ids below {vocab}")
    try:
        sizes = sorted({int(n) for n in a.sizes.split(",")})
    except ValueError:
        sys.exit(f"reduced_vocab: --sizes '{a.sizes}' is not a list of integers")
    if sizes[0] < 1 or sizes[-1] > len(ranking):
        sys.exit(f"reduced_vocab: every N must be in 1..{len(ranking)} (the ranking's length)")
    out_dir = Path(a.out_dir) if a.out_dir else draft.parent
    for n in sizes:
        out = out_dir / f"{draft.stem}-vocab{n}.gguf"
        write_reduced(reader, ranking, n, out)
        print(out)


if __name__ == "__main__":
    main()
