#!/usr/bin/python3
"""Grow the testbed target GGUF function-preservingly into a memory-bound benchmark target (never commit
the output: regenerate it).

  /usr/bin/python3 bench/grown_target/grow_target.py --quantize Q8_0,Q4_0,Q4_K_M

writes build/models/testbed-target-w4-f3-l12-F16.gguf (dim 2048, 32 heads, 16 kv heads, FFN 6144, 12
layers: 605 M parameters, 1.13 GiB of F16, close to the 1.01 GiB dim-2048 12-layer FFN-5632 reference
model) and its -Q8_0/-Q4_0/-Q4_K_M siblings (pinned llama-quantize). It computes what
models/testbed-target.gguf computes, up to float summation order (bench/grown_target/test_grow_target.py checks it).
Same bytes on every run. An output that exists and is newer than its input (and this script) is kept.

  --width K    residual stream x K: K copies of the old one (token_embd columns and RMSNorm gains tiled);
               heads and kv heads x K with the same head_dim, new head h copies old head h mod H. Copies
               are in block order, so llama.cpp's grouped-query map (query head h reads kv head
               h // (n_head / n_head_kv)) sends every new query head to a copy of its own old kv head.
               Copying whole heads also keeps the per-head Q/K row permutation of llama.cpp's converters
               valid (it permutes rows within a head).
  --ffn M      FFN hidden x M: unit u copies old unit u mod F.
  --layers N   total block count (>= the input's). The extra blocks are identities (attn_output and
               ffn_down zero, the other matrices N(0, 0.02^2), norms 1), spread evenly between the old ones.
  Every matrix that reads a widened input splits each weight over the n copies of its input: n - 1 copies
  get fp16(W/n), the last fp16(W - (n-1) fp16(W/n)); for power-of-two n (and normal W/n) that is W/n
  exactly. Matrices that write a widened output repeat their rows. With a tied output (no output.weight)
  the final norm gain is divided by K, as tools/testbed/grow.py does; a separate output.weight gets its
  columns split over the K copies instead.

gguf-py comes from the pinned llama.cpp source (scripts/build-llama.sh): $KLSPEC_GGUF_PY, else
$KLSPEC_LLAMA_PREFIX/../src/gguf-py, else ~/.cache/klspec/llama.cpp-de3ff815ea7d-*/src/gguf-py. llama-quantize: --llama-bin DIR, else
$KLSPEC_LLAMA_PREFIX/bin, else the cache's install/bin.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit("grow_target: error: numpy missing (run with /usr/bin/python3: Debian's python3-numpy)")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LLAMA_PIN = "de3ff815ea7d"
DEFAULT_INPUT = os.path.join(ROOT, "models", "testbed-target.gguf")
DEFAULT_WIDTH, DEFAULT_FFN, DEFAULT_LAYERS = 4, 3, 12
QUANT_TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
               "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "BF16", "F32")
SEED = 0
NEW_STD = 0.02


class GrowError(Exception):
    pass


def log(msg):
    print(f"grow_target: {msg}", file=sys.stderr, flush=True)


def cache_root():
    return os.environ.get("KLSPEC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "klspec")


def llama_dirs():
    """Candidate llama.cpp cache dirs (the one holding src/ and install/): $KLSPEC_LLAMA_PREFIX/.. first."""
    out = []
    if os.environ.get("KLSPEC_LLAMA_PREFIX"):
        out.append(os.path.dirname(os.path.abspath(os.environ["KLSPEC_LLAMA_PREFIX"])))
    out += sorted(glob.glob(os.path.join(cache_root(), f"llama.cpp-{LLAMA_PIN}-*")))
    return [d for d in out if os.path.isdir(d)]


def find_gguf_py():
    if os.environ.get("KLSPEC_GGUF_PY"):  # a source tree's gguf-py (CMake's LLAMA_SOURCE_DIR build)
        return os.environ["KLSPEC_GGUF_PY"] if os.path.isdir(os.environ["KLSPEC_GGUF_PY"]) else None
    for d in llama_dirs():
        p = os.path.join(d, "src", "gguf-py")
        if os.path.isfile(os.path.join(p, "gguf", "__init__.py")):
            return p
    return None


def import_gguf():
    p = find_gguf_py()
    if p is None:
        where = os.environ.get("KLSPEC_GGUF_PY") or f"{cache_root()}/llama.cpp-{LLAMA_PIN}-*/src/gguf-py"
        raise GrowError(f"llama.cpp's gguf-py not found (no {where}; run scripts/build-llama.sh, or set "
                        "KLSPEC_LLAMA_PREFIX or KLSPEC_GGUF_PY)")
    if p not in sys.path:
        sys.path.insert(0, p)
    import gguf  # noqa: E402
    return gguf


def find_llama_bin(explicit, tool):
    cands = [explicit] if explicit else (
        ([os.path.join(os.environ["KLSPEC_LLAMA_PREFIX"], "bin")] if os.environ.get("KLSPEC_LLAMA_PREFIX") else [])
        + [os.path.join(d, "install", "bin") for d in llama_dirs()])
    for d in cands:
        if os.access(os.path.join(d, tool), os.X_OK):
            return os.path.join(d, tool)
    raise GrowError(f"{tool} not found in {', '.join(cands) or 'the llama.cpp cache'} "
                    "(run scripts/build-llama.sh or pass --llama-bin DIR)")


# --- the growth, one tensor at a time ------------------------------------------------------------------

def split_cols(W, n):
    """(R, C) -> (R, n*C): n column blocks whose sum is W (see the docstring)."""
    if n == 1:
        return W
    if W.dtype == np.float32:
        q = W / np.float32(n)
        last = (W.astype(np.float64) - (n - 1) * q.astype(np.float64)).astype(np.float32)
    else:
        q = (W.astype(np.float32) / np.float32(n)).astype(W.dtype)
        last = (W.astype(np.float64) - (n - 1) * q.astype(np.float64)).astype(W.dtype)
    return np.concatenate([q] * (n - 1) + [last], axis=1)


def widen(W, rows, cols):
    """Rows repeated `rows` times (new row r copies old row r mod R), each weight split over `cols` input copies."""
    return split_cols(np.tile(W, (rows, 1)), cols)


# per-block matrix: (row factor, column factor) in terms of k (width) and m (ffn)
BLOCK_MATS = {"attn_q": ("k", "k"), "attn_k": ("k", "k"), "attn_v": ("k", "k"), "attn_output": ("k", "k"),
              "ffn_gate": ("m", "k"), "ffn_up": ("m", "k"), "ffn_down": ("k", "m")}
BLOCK_NORMS = ("attn_norm", "ffn_norm")
ZERO_IN_NEW = ("attn_output", "ffn_down")


class Plan:
    """The grown model's tensors in file order: (name, numpy shape, dtype, producer)."""

    def __init__(self, reader, arch, k, m, n_layers, seed=SEED):
        self.k, self.m = k, m
        t = {x.name: x for x in reader.tensors}
        self.src = t
        L = max([int(mo.group(1)) for n in t if (mo := re.match(r"blk\.(\d+)\.", n))], default=-1) + 1
        self.L_old = L
        if n_layers < L:
            raise GrowError(f"--layers {n_layers} is fewer than the input's {L} blocks")
        self.tied = "output.weight" not in t
        known = {"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"}
        known |= {f"blk.{i}.{b}.weight" for i in range(L) for b in list(BLOCK_MATS) + list(BLOCK_NORMS)}
        unknown = sorted(set(t) - known)
        if unknown:
            raise GrowError(f"cannot grow tensors {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}")
        for name, x in t.items():
            if x.tensor_type.name not in ("F16", "F32"):
                raise GrowError(f"{name} is {x.tensor_type.name}; only F16/F32 inputs can be grown")
        for i in range(L):
            for b in list(BLOCK_MATS) + list(BLOCK_NORMS):
                if f"blk.{i}.{b}.weight" not in t:
                    raise GrowError(f"blk.{i}.{b}.weight missing")
        n_new = n_layers - L
        self.old_at = {i + (i + 1) * n_new // (L + 1): i for i in range(L)}  # new index -> old index
        self.entries = []
        f = self.factor

        def arr(name):
            return np.asarray(t[name].data)

        def add(name, shape, dtype, fn):
            self.entries.append((name, tuple(shape), np.dtype(dtype), fn))

        def grown_shape(name, rf, cf):
            R, C = arr(name).shape
            return (f(rf) * R, f(cf) * C)

        e = arr("token_embd.weight")
        add("token_embd.weight", (e.shape[0], k * e.shape[1]), e.dtype, lambda: np.tile(arr("token_embd.weight"), (1, k)))
        if "rope_freqs.weight" in t:
            add("rope_freqs.weight", arr("rope_freqs.weight").shape, arr("rope_freqs.weight").dtype,
                lambda: np.array(arr("rope_freqs.weight")))
        on = arr("output_norm.weight")
        if self.tied:  # the tied output projection sums k identical copies: divide the gain
            add("output_norm.weight", (k * on.shape[0],), on.dtype,
                lambda: (np.tile(arr("output_norm.weight"), k) / np.asarray(k, on.dtype)).astype(on.dtype))
        else:
            add("output_norm.weight", (k * on.shape[0],), on.dtype, lambda: np.tile(arr("output_norm.weight"), k))
            add("output.weight", grown_shape("output.weight", "1", "k"), arr("output.weight").dtype,
                lambda: widen(arr("output.weight"), 1, k))
        for i in range(n_layers):
            if i in self.old_at:
                o = self.old_at[i]
                for b in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                          "ffn_up", "ffn_down"):
                    src = f"blk.{o}.{b}.weight"
                    if b in BLOCK_NORMS:
                        add(f"blk.{i}.{b}.weight", (k * arr(src).shape[0],), arr(src).dtype,
                            lambda src=src: np.tile(arr(src), k))
                    else:
                        rf, cf = BLOCK_MATS[b]
                        add(f"blk.{i}.{b}.weight", grown_shape(src, rf, cf), arr(src).dtype,
                            lambda src=src, rf=rf, cf=cf: widen(arr(src), f(rf), f(cf)))
            else:  # identity block: shapes and dtypes of old block 0's grown tensors
                for j, b in enumerate(("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                                       "ffn_gate", "ffn_up", "ffn_down")):
                    src = f"blk.0.{b}.weight"
                    dt = arr(src).dtype
                    if b in BLOCK_NORMS:
                        shape = (k * arr(src).shape[0],)
                        add(f"blk.{i}.{b}.weight", shape, dt, lambda shape=shape, dt=dt: np.ones(shape, dt))
                    else:
                        shape = grown_shape(src, *BLOCK_MATS[b])
                        if b in ZERO_IN_NEW:
                            add(f"blk.{i}.{b}.weight", shape, dt, lambda shape=shape, dt=dt: np.zeros(shape, dt))
                        else:
                            add(f"blk.{i}.{b}.weight", shape, dt,
                                lambda shape=shape, dt=dt, s=(seed, i, j): (
                                    np.random.default_rng(s).standard_normal(shape, dtype=np.float32)
                                    * np.float32(NEW_STD)).astype(dt))

    def factor(self, which):
        return {"1": 1, "k": self.k, "m": self.m}[which]

    def n_params(self):
        return sum(int(np.prod(s)) for _, s, _, _ in self.entries)

    def n_bytes(self):
        return sum(int(np.prod(s)) * dt.itemsize for _, s, dt, _ in self.entries)


def metadata(reader, gguf, arch, k, m, n_layers, plan):
    """(key, value, type, sub_type) for every KV of the output except general.architecture (the writer's)."""
    f = reader.fields

    def scalar(key):
        if key not in f:
            raise GrowError(f"metadata {key} missing")
        if len(f[key].types) != 1:
            raise GrowError(f"metadata {key} is an array (per-layer values are not supported)")
        return f[key].contents()

    dim, ffn = scalar(f"{arch}.embedding_length"), scalar(f"{arch}.feed_forward_length")
    nh, nkv = scalar(f"{arch}.attention.head_count"), scalar(f"{arch}.attention.head_count_kv")
    if scalar(f"{arch}.block_count") != plan.L_old:
        raise GrowError(f"block_count {scalar(f'{arch}.block_count')} but {plan.L_old} blocks of tensors")
    q = plan.src["blk.0.attn_q.weight"].data.shape
    kk = plan.src["blk.0.attn_k.weight"].data.shape
    g = plan.src["blk.0.ffn_gate.weight"].data.shape
    if q != (q[0], dim) or q[0] % nh or kk[0] != (q[0] // nh) * nkv or g != (ffn, dim):
        raise GrowError(f"tensor shapes {q}, {kk}, {g} disagree with the metadata (dim {dim}, ffn {ffn}, "
                        f"heads {nh}/{nkv})")
    new = {f"{arch}.embedding_length": k * dim, f"{arch}.feed_forward_length": m * ffn,
           f"{arch}.block_count": n_layers, f"{arch}.attention.head_count": k * nh,
           f"{arch}.attention.head_count_kv": k * nkv}
    name = f["general.name"].contents() if "general.name" in f else os.path.basename(reader.data.filename)
    new["general.name"] = f"{name} grown width x{k} ffn x{m} {n_layers} layers"
    out = []
    T = gguf.GGUFValueType
    for key, field in f.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        if key in new:
            out.append((key, new.pop(key), vtype, None))
            continue
        if vtype == T.ARRAY:
            if len(field.types) != 2:
                raise GrowError(f"metadata {key}: nested arrays are not supported")
            out.append((key, field.contents(), vtype, field.types[1]))
        else:
            out.append((key, field.contents(), vtype, None))
    for key, val in new.items():  # general.name when the input had none
        out.append((key, val, T.STRING if isinstance(val, str) else T.UINT32, None))
    return out


def grow_file(inp, out, k, m, n_layers, seed=SEED):
    gguf = import_gguf()
    try:
        reader = gguf.GGUFReader(inp)
    except Exception as e:  # noqa: BLE001 (gguf-py raises ValueError, struct.error, ...)
        raise GrowError(f"cannot read {inp} as GGUF: {e}")
    if "general.architecture" not in reader.fields:
        raise GrowError(f"{inp}: no general.architecture")
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise GrowError(f"{inp}: architecture {arch!r}, only llama can be grown")
    plan = Plan(reader, arch, k, m, n_layers, seed)
    kvs = metadata(reader, gguf, arch, k, m, n_layers, plan)
    log(f"{inp}: {plan.L_old} blocks -> {n_layers}, width x{k}, ffn x{m}, tied output {plan.tied}: "
        f"{plan.n_params() / 1e6:.1f} M parameters, {plan.n_bytes() / 2**30:.3f} GiB")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    if "general.alignment" in reader.fields:
        w.data_alignment = int(reader.fields["general.alignment"].contents())
    for key, val, vtype, sub in kvs:
        w.add_key_value(key, val, vtype, sub)
    for name, shape, dt, _ in plan.entries:
        w.add_tensor_info(name, shape, dt, int(np.prod(shape)) * dt.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    t0, done = time.time(), 0
    for idx, (name, shape, dt, fn) in enumerate(plan.entries):
        a = np.ascontiguousarray(fn())
        if a.shape != shape or a.dtype != dt:
            raise GrowError(f"internal: {name} came out {a.shape} {a.dtype}, planned {shape} {dt}")
        w.write_tensor_data(a)
        done += a.nbytes
        if idx % 18 == 17 or idx == len(plan.entries) - 1:
            log(f"  {idx + 1}/{len(plan.entries)} tensors, {done / 2**20:.0f} MiB, {time.time() - t0:.1f} s")
    w.close()
    os.replace(tmp, out)
    return plan


def up_to_date(out, inputs):
    return os.path.exists(out) and all(os.path.getmtime(out) > os.path.getmtime(i) for i in inputs)


def sibling(out, qtype):
    stem = out[:-5] if out.endswith(".gguf") else out
    stem = re.sub(r"-[Ff]16$", "", stem)
    return f"{stem}-{qtype}.gguf"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=DEFAULT_INPUT, help="the F16/F32 llama GGUF to grow (default: %(default)s)")
    ap.add_argument("--width", type=int, default=DEFAULT_WIDTH, help="residual width and head factor (default %(default)s)")
    ap.add_argument("--ffn", type=int, default=DEFAULT_FFN, help="FFN hidden factor (default %(default)s)")
    ap.add_argument("--layers", type=int, default=DEFAULT_LAYERS, help="total block count (default %(default)s)")
    ap.add_argument("--out", default=None, help="output F16 GGUF (default build/models/testbed-target-wK-fM-lN-F16.gguf)")
    ap.add_argument("--quantize", default="", help="comma-separated llama-quantize types, e.g. Q8_0,Q4_0,Q4_K_M")
    ap.add_argument("--llama-bin", default=None, help="folder with llama-quantize (default: the pinned build's)")
    ap.add_argument("--threads", type=int, default=2, help="llama-quantize threads (default %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED, help="seed of the identity blocks' random matrices")
    ap.add_argument("--force", action="store_true", help="rewrite outputs that look up to date")
    args = ap.parse_args(argv)
    try:
        if args.width < 1 or args.ffn < 1:
            raise GrowError("--width and --ffn must be positive")
        qtypes = [q.strip() for q in args.quantize.split(",") if q.strip()]
        bad = [q for q in qtypes if q.upper() not in QUANT_TYPES]
        if bad:
            raise GrowError(f"unknown quantization type(s) {', '.join(bad)} (known: {', '.join(QUANT_TYPES)})")
        if not os.path.isfile(args.input):
            raise GrowError(f"input {args.input} not found")
        out = args.out or os.path.join(ROOT, "build", "models", f"testbed-target-w{args.width}-f{args.ffn}"
                                       f"-l{args.layers}-F16.gguf")
        quantize = find_llama_bin(args.llama_bin, "llama-quantize") if qtypes else None
        if not args.force and up_to_date(out, [args.input, os.path.abspath(__file__)]):
            log(f"{out} is newer than {args.input} and this script: kept")
        else:
            t0 = time.time()
            grow_file(args.input, out, args.width, args.ffn, args.layers, args.seed)
            log(f"wrote {out} ({os.path.getsize(out) / 2**30:.3f} GiB) in {time.time() - t0:.1f} s")
        for q in qtypes:
            q = q.upper()
            dst = sibling(out, q)
            if not args.force and up_to_date(dst, [out]):
                log(f"{dst} is newer than {out}: kept")
                continue
            log(f"quantizing to {q}: {dst}")
            t0 = time.time()
            r = subprocess.run([quantize, out, dst + ".tmp", q, str(args.threads)], capture_output=True, text=True)
            if r.returncode != 0:
                raise GrowError(f"llama-quantize {q} failed ({r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
            os.replace(dst + ".tmp", dst)
            log(f"wrote {dst} ({os.path.getsize(dst) / 2**30:.3f} GiB) in {time.time() - t0:.1f} s")
    except GrowError as e:
        print(f"grow_target: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
