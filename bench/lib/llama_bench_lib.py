"""Running the pinned llama.cpp's `llama-bench` and turning its JSON into per-batch costs.

Shared by bench/costs/verify_cost_curve.py and bench/costs/sgemm_compare.py. Standard library only.

Which ggml llama-bench runs on is chosen with `lib_path` ("DIR[:DIR...]"): it goes first on
LD_LIBRARY_PATH, and `check_override` proves with `ldd` that the dynamic loader resolves libggml-cpu.so
(and every libggml* the first folder has) from the first folder. llama-bench's RUNPATH does not beat
LD_LIBRARY_PATH; a DT_RPATH would, and is refused. Always pass it: the libraries next to llama-bench in
the llama.cpp build folder are not necessarily the ones that were installed.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

LLAMA_COMMIT = "de3ff815ea7d559ee917f063901b8986f038abc6"


def default_llama_install():
    """The install folder scripts/build-llama.sh made (KLSPEC_LLAMA_INSTALL overrides)."""
    if os.environ.get("KLSPEC_LLAMA_INSTALL"):
        return Path(os.environ["KLSPEC_LLAMA_INSTALL"])
    cache = Path(os.environ.get("KLSPEC_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "klspec"))
    builds = sorted(cache.glob(f"llama.cpp-{LLAMA_COMMIT[:12]}-*/install/bin/llama-bench"))
    # scripts/build-llama.sh marks a build whose reference tools are installed with .common-installed.
    done = [b for b in builds if (b.parents[2] / ".common-installed").exists()]
    if not done and len(builds) == 1:
        print(f"bench: no llama.cpp build under {cache} is marked .common-installed; using {builds[0].parents[1]}",
              file=sys.stderr)
        done = builds
    if len(done) > 1 or (not done and builds):
        sys.exit(f"bench: several llama.cpp builds under {cache} ({', '.join(str(b.parents[2].name) for b in builds)}); "
                 "set KLSPEC_LLAMA_INSTALL to the install folder to use")
    if not done:
        sys.exit(f"bench: no llama.cpp build with llama-bench under {cache}; run scripts/build-llama.sh "
                 "or set KLSPEC_LLAMA_INSTALL")
    return done[0].parents[1]


def env_for(lib_path):
    env = dict(os.environ)
    if lib_path:
        env["LD_LIBRARY_PATH"] = str(lib_path) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def resolved_libs(binary, lib_path):
    """{soname: resolved path} for the ggml/llama libraries `binary` loads under that environment."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env_for(lib_path), check=True).stdout
    libs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and ("ggml" in parts[0] or "llama" in parts[0]):
            libs[parts[0]] = str(Path(parts[2]).resolve())
    return libs


def check_override(binary, lib_path):
    """Exit unless libggml-cpu (and every libggml* the first folder of lib_path has) resolves from that folder."""
    dyn = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    if "(RPATH)" in dyn:
        sys.exit(f"bench: {binary} has DT_RPATH, which LD_LIBRARY_PATH cannot override")
    libs = resolved_libs(binary, lib_path)
    want = Path(str(lib_path).split(":")[0]).resolve()
    cpu = [p for name, p in libs.items() if name.startswith("libggml-cpu.so")]
    if not cpu or Path(cpu[0]).parent != want:
        sys.exit(f"bench: libggml-cpu.so resolves to {cpu} with LD_LIBRARY_PATH={lib_path}, not to {want}")
    for name, p in libs.items():
        if name.startswith("libggml") and (want / name).exists() and Path(p).parent != want:
            sys.exit(f"bench: {name} resolves to {p}, not to {want}")
    return libs


def llama_bench(binary, model, prompts, gens, threads, reps, lib_path=None, extra=(), taskset=None):
    """One llama-bench run; returns its JSON records (one per test)."""
    cmd = [str(binary), "-m", str(model), "-t", str(threads), "-r", str(reps), "-o", "json"]
    if prompts:
        cmd += ["-p", ",".join(map(str, prompts))]
    else:
        cmd += ["-p", "0"]
    cmd += ["-n", ",".join(map(str, gens)) if gens else "0"]
    cmd += list(extra)
    if taskset is not None:
        cmd = [shutil.which("taskset") or "taskset", "-c", str(taskset)] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, env=env_for(lib_path))
    if done.returncode != 0:
        sys.exit(f"bench: llama-bench failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def command_line(binary, model, prompts, gens, threads, reps, lib_path=None, extra=(), taskset=None):
    """The shell command llama_bench() runs, for the write-up."""
    pre = f"LD_LIBRARY_PATH={lib_path} " if lib_path else ""
    ts = f"taskset -c {taskset} " if taskset is not None else ""
    p = ",".join(map(str, prompts)) if prompts else "0"
    n = ",".join(map(str, gens)) if gens else "0"
    return f"{pre}{ts}{binary} -m {model} -t {threads} -r {reps} -p {p} -n {n}{' ' + ' '.join(extra) if extra else ''} -o json"


def summarize(records):
    """Per test: {'kind': 'pp'|'tg', 'n': tokens, 'samples_ns': [...]} keyed by (kind, n)."""
    out = {}
    for r in records:
        kind, n = ("pp", r["n_prompt"]) if r["n_gen"] == 0 else ("tg", r["n_gen"])
        out.setdefault((kind, n), []).extend(r["samples_ns"])
    return out


def stats(samples_ns, n_tokens):
    """Per call: median ms (`ms`, what the tables use: robust to the other jobs on a shared machine), mean,
    sample standard deviation, min; tokens/s of the median; the sample count."""
    ms = [s / 1e6 for s in samples_ns]
    med = statistics.median(ms)
    sd = statistics.stdev(ms) if len(ms) > 1 else 0.0
    return {"ms": med, "mean_ms": statistics.fmean(ms), "sd_ms": sd, "min_ms": min(ms),
            "tps": n_tokens / (med / 1e3), "k": len(ms)}


def model_info(binary, model, lib_path=None):
    """Type, size and parameter count from a 1-token llama-bench run's JSON."""
    r = llama_bench(binary, model, [1], [], 1, 1, lib_path)[0]
    return {"type": r.get("model_type", "?"), "size": r.get("model_size", 0), "params": r.get("model_n_params", 0)}


def write_report(lines, commands, rounds, md_path):
    """Appends the commands that produced a table, prints the markdown and writes it to md_path (if any)."""
    lines = lines + [f"Commands ({rounds} round(s)):", "", "```"] + list(dict.fromkeys(commands)) + ["```", ""]
    text = "\n".join(lines)
    if md_path:
        md_path.write_text(text)
    print(text)
