"""Tests of grow.py: the grown model computes the small model's logits, and fine-tuning can train
every weight (the copies made by widening do not stay tied).

  cd tools/testbed && OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -m unittest -v test_grow     (needs torch)
"""
import os
import sys
import unittest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
try:
    import torch
except ImportError:  # the generator tests run without torch; these need it
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if torch is not None:
    import grow
    from model import PRESETS, Config, Llama


def random_model(c, seed):
    """A model with every weight random (no zero or one initialisations that could hide a bug)."""
    torch.manual_seed(seed)
    m = Llama(c)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 2 else 0.5) + (1.0 if p.dim() == 1 else 0.0))
    return m


def logits(m, x):
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None].expand(x.shape[0], 1, T, T)
    return m(x, torch.arange(T)[None].expand(x.shape[0], T), mask)


@unittest.skipIf(torch is None, "needs torch (/usr/bin/python3 with python3-torch)")
class Grow(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)

    def check(self, cs, cb, T=24, tol=1e-4):
        small = random_model(cs, 0)
        big = Llama(cb)
        big.load_state_dict(grow.grow(small.state_dict(), cs, cb, seed=3))
        x = torch.randint(0, cs.vocab_size, (2, T), generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            a, b = logits(small, x), logits(big, x)
        scale = a.abs().max().item()
        self.assertLess((a - b).abs().max().item(), tol * max(1.0, scale))
        self.assertTrue(torch.equal(a.argmax(-1), b.argmax(-1)))
        return small, big, x

    def test_same_logits_wider_and_deeper(self):
        cs = Config(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=48, vocab_size=64, max_seq_len=64)
        cb = Config(dim=64, n_layers=5, n_heads=8, n_kv_heads=4, hidden_dim=192, vocab_size=64, max_seq_len=64)
        self.check(cs, cb)

    def test_same_logits_width_three_and_mqa(self):
        cs = Config(dim=16, n_layers=2, n_heads=2, n_kv_heads=1, hidden_dim=24, vocab_size=40, max_seq_len=64)
        cb = Config(dim=48, n_layers=2, n_heads=6, n_kv_heads=3, hidden_dim=48, vocab_size=40, max_seq_len=64)
        self.check(cs, cb)

    def test_presets(self):
        # the testbed's real pair: tb-small (3.7 M) -> tb-target (39.6 M, >= 64 MiB in F16)
        _, big, _ = self.check(PRESETS["tb-small"], PRESETS["tb-target"], T=12)
        self.assertGreaterEqual(big.n_params() * 2, 64 * 2**20)

    def test_every_weight_trains(self):
        cs = Config(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=48, vocab_size=64, max_seq_len=64)
        cb = Config(dim=64, n_layers=3, n_heads=8, n_kv_heads=4, hidden_dim=96, vocab_size=64, max_seq_len=64)
        _, big, x = self.check(cs, cb)
        before = {n: p.detach().clone() for n, p in big.named_parameters()}
        opt = torch.optim.AdamW(big.parameters(), lr=1e-3)  # what train.py fine-tunes with
        for _ in range(3):  # zero-initialised projections move first, then pass gradients to the rest
            loss = torch.nn.functional.cross_entropy(logits(big, x)[:, :-1].reshape(-1, 64), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        for n, p in big.named_parameters():
            self.assertFalse(torch.equal(before[n], p.detach()), f"{n} did not change")
        # the two copies of the residual stream are no longer identical functions of the input
        emb = big.tok_emb.weight.detach()
        self.assertGreater((emb[:, :32] - emb[:, 32:]).abs().max().item(), 1e-6)
        wq = big.layers[0].wq.weight.detach()  # rows of head copy 0 and head copy 4
        self.assertGreater((wq[:8] - wq[32:40]).abs().max().item(), 1e-6)

    def test_refuses_bad_shapes(self):
        cs = PRESETS["tb-small"]
        with self.assertRaises(ValueError):
            grow.grow({}, cs, Config(dim=384, n_layers=6, n_heads=6, n_kv_heads=3, hidden_dim=1024))


if __name__ == "__main__":
    unittest.main()
