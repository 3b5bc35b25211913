"""The test models of the model-families label (docs/model-families.md), written by make_family_model.py
into OUT (the CTest fixture model_families.make runs this; models already there are kept: CMake keys OUT by
both scripts' contents and the llama.cpp tree, so a changed script writes a new folder):

  OUT/<family>-target.gguf, OUT/<family>-draft.gguf   one pair per family: the same random weights in F16
                                                        (target; its embedding Q8_0) and Q4_0 (draft)
  OUT/pairs/*.gguf                                      the pair-rule cases (tests/model_families/test_pair_rule.cpp)

  PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 tests/model_families/make_family_models.py \
      --llama-models <llama.cpp>/models --out ~/.cache/klspec/test-models/families-KEY
"""
import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
MAKER = os.path.join(HERE, "make_family_model.py")
# models/ggml-vocab-<name>.gguf of the pinned tree: Llama 3, Qwen2/2.5, Qwen3.5, Gemma 4, Phi-3, DeepSeek LLM,
# Llama 2 (SentencePiece with byte fallback).
FAMILIES = ["llama-bpe", "qwen2", "qwen35", "gemma-4", "phi-3", "deepseek-llm", "llama-spm"]
# The pair-rule cases, on Phi-3's vocabulary (32064 tokens; adds BOS, not EOS; EOS 32000, <|end|> 32007).
# A pad token follows token PAD_AFTER clearly, so padded drafts propose ids the target lacks.
PAIR_VOCAB = "phi-3"
PAD_AFTER = 1000
PAIR_MODELS = {
    "target": ["--quant", "f16"],
    "target-add-eos": ["--quant", "f16", "--add-eos", "1"],
    "target-pad128": ["--quant", "f16", "--pad", "128", "--pad-after", str(PAD_AFTER)],
    "draft": ["--quant", "q4_0"],
    "draft-pad128": ["--quant", "q4_0", "--pad", "128", "--pad-after", str(PAD_AFTER)],
    "draft-pad129": ["--quant", "q4_0", "--pad", "129"],
    "draft-eos": ["--quant", "q4_0", "--eos", "32007"],
    "draft-add-eos": ["--quant", "q4_0", "--add-eos", "1"],
    "draft-add-eos-eos": ["--quant", "q4_0", "--add-eos", "1", "--eos", "32007"],
    "draft-bos": ["--quant", "q4_0", "--bos", "32007"],
    "draft-text1000": ["--quant", "q4_0", "--token-text", "1000=klspec"],
    "draft-text3": ["--quant", "q4_0", "--token-text", "3=klspec"],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-models", required=True, help="the pinned llama.cpp tree's models/ folder")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    jobs = []
    for family in FAMILIES:
        vocab = os.path.join(a.llama_models, f"ggml-vocab-{family}.gguf")
        if not os.path.exists(vocab):
            sys.exit(f"make_family_models: {vocab} is missing (is this the pinned llama.cpp tree?)")
        jobs.append((vocab, os.path.join(a.out, f"{family}-target.gguf"), ["--quant", "f16"]))
        jobs.append((vocab, os.path.join(a.out, f"{family}-draft.gguf"), ["--quant", "q4_0"]))
    for name, options in PAIR_MODELS.items():
        vocab = os.path.join(a.llama_models, f"ggml-vocab-{PAIR_VOCAB}.gguf")
        jobs.append((vocab, os.path.join(a.out, "pairs", f"{name}.gguf"), options))

    todo = [job for job in jobs if not os.path.exists(job[1])]
    os.makedirs(os.path.join(a.out, "pairs"), exist_ok=True)

    def run(job):
        vocab, out, options = job
        partial = out + ".partial"  # renamed when complete: a killed run leaves no truncated model behind
        subprocess.run([sys.executable, MAKER, vocab, partial, *options], check=True)
        os.replace(partial, out)
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        for out in pool.map(run, todo):
            print(f"wrote {out}")
    print(f"{len(jobs) - len(todo)} models were up to date, {len(todo)} written")


if __name__ == "__main__":
    main()
