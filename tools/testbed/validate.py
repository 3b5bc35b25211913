"""Greedy accuracy of train.py checkpoints on the first N validation problems of each family: train.py's
own evaluation (the same problems first, the same scorer), on more problems, to choose between runs
without looking at the test split. One core per process.

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/testbed/validate.py CKPT.pt [CKPT.pt ...] [-n 200]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "training"))
import torch  # noqa: E402

import tasks  # noqa: E402
from model import Config, Llama  # noqa: E402
from tok512 import Tok512  # noqa: E402
from train import evaluate  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("-n", type=int, default=200, help="validation problems per family")
    args = parser.parse_args()
    torch.set_num_threads(1)
    source = tasks.get("testbed")
    rows = source.validation(args.n * len(source.families))
    for path in args.checkpoints:
        checkpoint = torch.load(path, map_location="cpu")
        model = Llama(Config(**checkpoint["config"]))
        model.load_state_dict(checkpoint["model"])
        start = time.time()
        result = evaluate(model, Tok512(), source, rows, max_new=source.max_new)
        families = ", ".join(f"{family} {100 * result['family_acc'][family]:.1f} %" for family in source.families)
        print(f"{path}: {args.n} per family: {families}; all {100 * result['acc']:.1f} %, answer loss "
              f"{result['answer_loss']:.4f} ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
