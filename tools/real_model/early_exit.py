"""Write early-exit drafts of a GGUF model: its first k layers, then its own final norm and output head
(tied to the embedding on Gemma 3), every tensor copied byte for byte and no training (the idea of
LayerSkip, Draft & Verify and Self-SD). llama.cpp then runs the draft as the same architecture with
block_count = k; per-layer arrays of the metadata (e.g. a sliding-window pattern) are cut to k.

  PYTHONPATH=<llama.cpp cache>/src/gguf-py /usr/bin/python3 tools/real_model/early_exit.py \
      MODEL.gguf --layers 3,6,9,12 [--out-dir DIR]

writes DIR/<model stem>-exit<k>.gguf for each k (DIR: beside the model). Never commit the outputs: they
are the model's weights. Prints one path a line.
"""
import argparse
import re
import sys
from pathlib import Path

import gguf
from gguf_copy import write_model

LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")


def block_count_key(reader):
    arch = reader.fields["general.architecture"].contents()
    return f"{arch}.block_count", arch


def write_draft(reader, out_path, layers):
    count_key, arch = block_count_key(reader)
    n_layers = reader.fields[count_key].contents()

    def changed(name, value):
        if name == count_key:
            return layers
        if name.startswith(arch + ".") and isinstance(value, list) and len(value) == n_layers:
            return value[:layers]  # one entry per layer
        if name == "general.name":
            return f"{value} (first {layers} of {n_layers} layers, early exit)"
        return value

    kept = [(t.name, t.data, t.tensor_type) for t in reader.tensors
            if not (m := LAYER_TENSOR.match(t.name)) or int(m.group(1)) < layers]
    write_model(reader, out_path, changed, kept)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--layers", required=True, help="comma-separated k values, each in 1..block_count-1")
    ap.add_argument("--out-dir", help="where to write the drafts (default: beside the model)")
    a = ap.parse_args()
    model = Path(a.model)
    if not model.is_file():
        sys.exit(f"early_exit: {model}: no such file")
    try:
        ks = sorted({int(k) for k in a.layers.split(",")})
    except ValueError:
        sys.exit(f"early_exit: --layers '{a.layers}' is not a list of integers")
    reader = gguf.GGUFReader(str(model))
    count_key, _ = block_count_key(reader)
    n_layers = reader.fields[count_key].contents()
    if ks[0] < 1 or ks[-1] >= n_layers:
        sys.exit(f"early_exit: every k must be in 1..{n_layers - 1} ({model.name} has {n_layers} layers)")
    out_dir = Path(a.out_dir) if a.out_dir else model.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    for k in ks:
        out = out_dir / f"{model.stem}-exit{k}.gguf"
        partial = out.with_suffix(".partial")
        write_draft(reader, partial, k)
        partial.rename(out)
        print(out, flush=True)


if __name__ == "__main__":
    main()
