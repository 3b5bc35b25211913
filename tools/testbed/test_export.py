"""GGUF export matches PyTorch: a small random model exported with export_gguf.py (F32 and --f16) gives
llama.cpp the same prompt token ids and last-position logits as model.py, on testbed prompts.

  cd tools/testbed && OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -m unittest -v test_export

Needs torch, g++ and the pinned llama.cpp build (scripts/build-llama.sh): its install prefix is
$KLSPEC_LLAMA_PREFIX, or the first ~/.cache/klspec/llama.cpp-de3ff815ea7d-*/install with llama.h,
libllama and ../src/gguf-py. Skips otherwise.
"""
import glob
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
try:
    import torch
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.join(os.path.dirname(HERE), "training")
sys.path.insert(0, HERE)
sys.path.insert(0, TRAINING)


def llama_prefix():
    cands = [os.environ["KLSPEC_LLAMA_PREFIX"]] if os.environ.get("KLSPEC_LLAMA_PREFIX") else \
        sorted(glob.glob(os.path.expanduser("~/.cache/klspec/llama.cpp-de3ff815ea7d-*/install")))
    for p in cands:
        if os.path.exists(os.path.join(p, "include", "llama.h")) and glob.glob(os.path.join(p, "lib*", "libllama.so*")) \
                and os.path.isdir(os.path.join(p, "..", "src", "gguf-py")):
            return p
    return None


@unittest.skipIf(torch is None, "needs torch")
class Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = llama_prefix()
        if cls.prefix is None:
            raise unittest.SkipTest("no llama.cpp build found (scripts/build-llama.sh)")
        from tok512 import DEFAULT_PATH
        if not os.path.exists(DEFAULT_PATH):
            raise unittest.SkipTest("tok512 vocabulary (shared/models/stories260K) missing")
        cls.tmp = tempfile.TemporaryDirectory()
        lib = os.path.dirname(glob.glob(os.path.join(cls.prefix, "lib*", "libllama.so*"))[0])
        cls.dump = os.path.join(cls.tmp.name, "dump_logits")
        r = subprocess.run(["g++", "-O2", "-std=c++17", os.path.join(TRAINING, "dump_logits.cpp"),
                            "-I" + os.path.join(cls.prefix, "include"), "-L" + lib, "-Wl,-rpath," + lib,
                            "-lllama", "-o", cls.dump], capture_output=True, text=True)
        if r.returncode != 0:
            raise unittest.SkipTest("cannot build dump_logits: " + r.stderr[-500:])
        from model import Config, Llama
        torch.manual_seed(0)
        cls.model = Llama(Config(dim=64, n_layers=2, n_heads=2, n_kv_heads=1, hidden_dim=96, max_seq_len=512))
        with torch.no_grad():  # larger weights than the init, so the logits are far from uniform
            for p in cls.model.parameters():
                if p.dim() == 2:
                    p.mul_(8)
        cls.ckpt = os.path.join(cls.tmp.name, "m.pt")
        torch.save({"model": cls.model.state_dict(), "config": {**cls.model.c.__dict__}, "step": 0,
                    "tokens_seen": 0, "args": {"run": "export-test"}}, cls.ckpt)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def export(self, f16):
        out = os.path.join(self.tmp.name, "m16.gguf" if f16 else "m32.gguf")
        env = dict(os.environ, PYTHONPATH=os.path.join(self.prefix, "..", "src", "gguf-py"))
        subprocess.run([sys.executable, os.path.join(TRAINING, "export_gguf.py"), self.ckpt, out] + (["--f16"] if f16 else []),
                       check=True, env=env, capture_output=True)
        return out

    def compare(self, gguf, tol):
        import families
        from tok512 import BOS_ID, Tok512
        tok = Tok512()
        rng = random.Random(0)
        for fam in families.FAMILIES:
            prompt = families.make(fam, rng)["question"]
            r = subprocess.run([self.dump, gguf, prompt], capture_output=True, text=True, check=True)
            ids = [int(x) for x in re.search(r"prompt ids:([ \d]*)", r.stderr).group(1).split()]
            ours_ids = [BOS_ID] + tok.encode(prompt)
            self.assertEqual(ids, ours_ids, fam)
            theirs = torch.tensor([float(x) for x in r.stdout.split()])
            T = len(ids)
            with torch.no_grad():
                ours = self.model(torch.tensor([ids]), torch.arange(T)[None],
                                  torch.ones(T, T, dtype=torch.bool).tril()[None, None])[0, -1]
            diff = (ours - theirs).abs().max().item()
            self.assertLess(diff, tol * max(1.0, ours.abs().max().item()), f"{fam}: max |diff| {diff}")
            self.assertEqual(int(ours.argmax()), int(theirs.argmax()), fam)

    def test_f32(self):
        self.compare(self.export(False), 2e-3)

    def test_f16(self):
        self.compare(self.export(True), 1e-2)


if __name__ == "__main__":
    unittest.main()
