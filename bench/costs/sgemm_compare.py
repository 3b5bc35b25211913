"""llamafile's sgemm off against on, measured with the pinned llama-bench on the same models.

  /usr/bin/python3 bench/costs/sgemm_compare.py [--make-synthetic] [--models A.gguf B.gguf ...] \
      [--prompts 1,2,4,9,17,72] [--gen 16] [--threads 1] [--reps 3] [--rounds 2] [--taskset 1] \
      [--csv OUT.csv] [--md OUT.md]

Both sides run the same llama-bench binary (from the pinned install, scripts/build-llama.sh) on a ggml
chosen with LD_LIBRARY_PATH: two ggml-only builds of the same source with the flags of build-llama.sh
(Release, shared, GGML_NATIVE=ON, GGML_RPC=ON) that differ only in GGML_LLAMAFILE (OFF / ON), followed by
<install>/lib for libllama. The script makes them if absent (`nice -n 10`, `-j 1`, only the targets ggml,
ggml-base, ggml-cpu, ggml-rpc) in --ggml-off-dir / --ggml-on-dir (default
~/.cache/klspec/ggml-{nollamafile,llamafile}-de3ff815ea7d). `--off-lib DIR` measures OFF on another ggml
instead (e.g. <install>/lib, what klspec links). Before any measurement, ldd must resolve libggml-cpu.so
from the intended folder on each side.

--make-synthetic writes Llama-shaped random-weight models with bench/costs/make_synthetic_gguf.py into
--synthetic-dir (default ~/.cache/klspec/synthetic; never commit them): F32 and F16 (dim 512, 10 layers,
8 heads, 4 KV heads, ffn 1792, vocab 512: 35.9 M parameters) and Q8_0 / Q4_0 quantized from the F32 one
with the pinned llama-quantize (its default mix: for Q4_0 the output matrix becomes Q6_K).
Each round runs OFF then ON for every model; samples are pooled over rounds (rounds × reps samples).
"""
import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: llama_bench_lib
import llama_bench_lib as lb  # noqa: E402

HERE = Path(__file__).resolve().parent
SYNTH = {"dim": 512, "layers": 10, "heads": 8, "kv-heads": 4, "ffn": 1792, "vocab": 512}


def build_ggml(install, ggml_dir, llamafile):
    src = install.parent / "src"
    build = ggml_dir / "build"
    lib = build / "bin"
    if (lib / "libggml-cpu.so").exists():
        return lib
    print(f"sgemm_compare: building ggml with GGML_LLAMAFILE={llamafile} into {build} (nice, -j 1)", file=sys.stderr)
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DGGML_NATIVE=ON", "-DGGML_CUDA=OFF",
             f"-DGGML_LLAMAFILE={llamafile}", "-DGGML_RPC=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
             "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_COMMON=OFF"]
    # The llama.cpp tree's ggml/ lacks ggml.pc.in, so ggml cannot be configured on its own: configure the
    # whole tree and build only the ggml targets.
    subprocess.run(["nice", "-n", "10", "cmake", "-S", str(src), "-B", str(build), *flags], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["nice", "-n", "10", "cmake", "--build", str(build), "-j", "1", "--target",
                    "ggml", "ggml-base", "ggml-cpu", "ggml-rpc"], check=True)
    return lib


def make_synthetic(install, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(install.parent / "src" / "gguf-py"))
    models = []
    for dtype in ("f32", "f16"):
        path = out_dir / f"syn35m-{dtype}.gguf"
        if not path.exists():
            args = [f"--{k}={v}" for k, v in SYNTH.items()]
            subprocess.run(["/usr/bin/python3", str(HERE / "make_synthetic_gguf.py"), str(path), *args,
                            f"--dtype={dtype}"], check=True, env=env)
        models.append(path)
    for q in ("q8_0", "q4_0"):
        path = out_dir / f"syn35m-{q}.gguf"
        if not path.exists():
            subprocess.run([str(install / "bin" / "llama-quantize"), str(out_dir / "syn35m-f32.gguf"), str(path),
                            q.upper()], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        models.append(path)
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", type=Path, default=[])
    ap.add_argument("--make-synthetic", action="store_true")
    ap.add_argument("--synthetic-dir", type=Path, default=Path.home() / ".cache/klspec/synthetic")
    ap.add_argument("--ggml-on-dir", type=Path, default=Path.home() / ".cache/klspec/ggml-llamafile-de3ff815ea7d")
    ap.add_argument("--ggml-off-dir", type=Path, default=Path.home() / ".cache/klspec/ggml-nollamafile-de3ff815ea7d")
    ap.add_argument("--off-lib", type=Path, default=None, help="measure OFF on this ggml lib folder instead")
    ap.add_argument("--prompts", default="1,2,4,9,17,72")
    ap.add_argument("--gen", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--taskset", type=int, default=None)
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--md", type=Path, default=None)
    a = ap.parse_args()

    install = lb.default_llama_install()
    binary = install / "bin" / "llama-bench"
    off_dir = a.off_lib or build_ggml(install, a.ggml_off_dir, "OFF")
    on_dir = build_ggml(install, a.ggml_on_dir, "ON")
    builds = {"off": f"{off_dir}:{install / 'lib'}", "on": f"{on_dir}:{install / 'lib'}"}
    for name, path in builds.items():
        libs = lb.check_override(binary, path)
        print(f"sgemm {name.upper()}: " + ", ".join(f"{n} => {p}" for n, p in sorted(libs.items())), file=sys.stderr)

    models = list(a.models)
    if a.make_synthetic:
        models = make_synthetic(install, a.synthetic_dir) + models
    if not models:
        sys.exit("sgemm_compare: no models (give --models and/or --make-synthetic)")
    prompts = [int(x) for x in a.prompts.split(",")]
    if 1 not in prompts:
        prompts.insert(0, 1)
    gens = [a.gen] if a.gen > 0 else []

    pooled = {}  # (model, build) -> {(kind, n): samples}
    info = {m: lb.model_info(binary, m, builds["off"]) for m in models}
    commands = []
    for _ in range(a.rounds):
        for m in models:
            for name, lib in builds.items():
                commands.append(lb.command_line(binary, m, prompts, gens, a.threads, a.reps, lib, taskset=a.taskset))
                recs = lb.llama_bench(binary, m, prompts, gens, a.threads, a.reps, lib, taskset=a.taskset)
                for key, s in lb.summarize(recs).items():
                    pooled.setdefault((m, name), {}).setdefault(key, []).extend(s)
            print(f"sgemm_compare: {m.name} done", file=sys.stderr)

    rows = []
    for m in models:
        for name in builds:
            p = pooled[(m, name)]
            one = lb.stats(p[("pp", 1)], 1)
            for kind, n in sorted(p, key=lambda k: (k[0] != "pp", k[1])):
                s = lb.stats(p[(kind, n)], n)
                rows.append({"model": m.name, "type": info[m]["type"], "params": info[m]["params"], "sgemm": name,
                             "threads": a.threads, "test": f"{kind}{n}", "tokens": n, "ms": round(s["ms"], 4),
                             "sd_ms": round(s["sd_ms"], 4), "samples": s["k"], "tokens_per_s": round(s["tps"], 1),
                             "cost_vs_1": round(s["ms"] / one["ms"], 3) if kind == "pp" else "",
                             "ms_per_token": round(s["ms"] / n, 4)})
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    lines = []
    for m in models:
        lines += [f"**{m.name}** ({info[m]['type']}, {info[m]['params']:,} parameters), {a.threads} thread(s)", "",
                  "| test | OFF tokens/s | OFF ms/call (median ± sd) | OFF cost vs 1 | ON tokens/s | ON ms/call (median ± sd) | ON cost vs 1 | ON speedup |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        tests = [r["test"] for r in rows if r["model"] == m.name and r["sgemm"] == "off"]
        for t in tests:
            off = next(r for r in rows if r["model"] == m.name and r["sgemm"] == "off" and r["test"] == t)
            on = next(r for r in rows if r["model"] == m.name and r["sgemm"] == "on" and r["test"] == t)
            c_off = f"{off['cost_vs_1']:.2f}×" if off["cost_vs_1"] != "" else "—"
            c_on = f"{on['cost_vs_1']:.2f}×" if on["cost_vs_1"] != "" else "—"
            lines.append(f"| {t} | {off['tokens_per_s']:.1f} | {off['ms']:.3f} ± {off['sd_ms']:.3f} | {c_off} | "
                         f"{on['tokens_per_s']:.1f} | {on['ms']:.3f} ± {on['sd_ms']:.3f} | {c_on} | "
                         f"{off['ms'] / on['ms']:.2f}× |")
        lines.append("")
    lb.write_report(lines, commands, a.rounds, a.md)


if __name__ == "__main__":
    main()
