#!/usr/bin/python3
"""The speed report: writes docs/speed.md, every ratio measured side by side in one run on this machine.

  /usr/bin/python3 bench/speed/speed_report.py [--out docs/speed.md] [--work ~/.cache/klspec/speed-report] \\
      [--targets default,F16,Q8_0,Q4_0,Q4_K_M] [--limit-default 100] [--limit-grown 8] [--np-limit 16] \\
      [--tau auto|VALUE] [--threads 2] [--passes 2] [--fresh] [--klspec build/klspec] [--ngl 0] [--baseline BINARY]

For the default pair (models/testbed-*.gguf) and the grown targets (bench/grown_target/grow_target.py: the default
target grown function-preservingly to 1.13 GiB of F16, and its Q8_0 / Q4_0 / Q4_K_M quantizations, all
with the default draft):
  * the pinned llama-bench's cost curve (one decode of b tokens, b = 1, 2, 3, 5, 9, 17) and the draft's;
  * the ceiling it implies for vanilla at γ: MAT(γ) t_1 / (t_{γ+1} + γ t_draft), with MAT(γ) measured;
  * `klspec bench` on the word problems (data/testbed_word_test.jsonl): target-only, vanilla at fixed γ 4,
    8 and 16, the automatic choice (the default), and KL at the τ `klspec calibrate` picks on the validation
    split (data/testbed_word_validation.jsonl);
  * on the grown F16 target: -np 8 target-only, fixed γ 8 and automatic against -np 1;
  * the `klspec bench` settings (both kinds above) in --passes interleaved passes, odd ones in reverse order,
    pooled, with each pass's ratios shown: the machine's speed drifts more than the goals' margins;
  * `llama-speculative-simple --spec-type draft-simple` against `klspec generate` on the same prompts.
The grown targets compute what the default target computes, so accuracy and acceptance carry over; their
speed is measured on the first --limit-grown problems. Each measurement is kept as JSON under --work and
reused by a rerun (--fresh measures again): an interrupted report resumes. On a GPU (bench/gpu/gpu_check.sh):
--ngl 99 offloads every layer of both models in every run, klspec's and llama.cpp's, --klspec names a build
against the GPU-enabled llama.cpp, and KLSPEC_LLAMA_INSTALL names that llama.cpp install.
"""
import argparse
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "lib"))  # bench/lib: bench_common, llama_bench_lib
import llama_bench_lib as lb  # noqa: E402
from bench_common import checkout_commit, cpu_header, klspec_generate as generate_json, llama_speculative_simple, run  # noqa: E402

KLSPEC = ROOT / "build" / "klspec"  # --klspec
OFFLOAD = []  # --ngl N: ["-ngl", N] for every klspec and llama.cpp run
OFFLOAD_DRAFT = []  # and ["-ngld", N] for llama-speculative-simple's draft
DRAFT = ROOT / "models" / "testbed-draft.gguf"
DEFAULT_TARGET = ROOT / "models" / "testbed-target.gguf"
GROWN = "testbed-target-w4-f3-l12-{}.gguf"
WORDS = ROOT / "data" / "testbed_word_test.jsonl"
WORDS_VALIDATION = ROOT / "data" / "testbed_word_validation.jsonl"  # τ is chosen here, never on the test split
BATCHES = [1, 2, 3, 5, 9, 17]
GAMMAS = [4, 8, 16]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Store:
    """One JSON file per measurement under `work`: a rerun reuses what is there."""

    def __init__(self, work, fresh):
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.fresh = fresh

    def get(self, key, measure):
        path = self.work / (re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ".json")
        if path.exists() and not self.fresh:
            return json.loads(path.read_text())
        log(f"measuring {key}")
        value = measure()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(value))
        tmp.replace(path)
        return value


def llama_curve(binary, lib_path, model, threads, reps):
    records = lb.llama_bench(binary, model, BATCHES, [], threads, reps, lib_path, extra=OFFLOAD)
    per = lb.summarize(records)
    return {str(n): lb.stats(per[("pp", n)], n)["ms"] for n in BATCHES}


def klspec_bench(target, limit, flags, threads, n_predict=384, parallel=1, binary=None):
    cmd = [binary or KLSPEC, "bench", "--dataset", WORDS, "--limit", limit, "-t", threads, "-n", n_predict,
           "-m", target, "-md", DRAFT, "-np", parallel, "--json"] + OFFLOAD + flags
    out = json.loads(run(cmd).stdout)
    out["command"] = " ".join(map(str, cmd)).replace(str(ROOT) + "/", "")
    return out


def prompts(count):
    rows = [json.loads(line) for line in WORDS.read_text().splitlines()[:count]]
    return [r["question"] for r in rows]


def speculative_simple(llama_bin, target, prompt, gamma, threads, n_predict):
    tokens, seconds, acceptance = llama_speculative_simple(llama_bin, target, DRAFT, prompt, gamma, threads, n_predict,
                                                           ["-c", "2048"] + OFFLOAD + OFFLOAD_DRAFT)
    return {"tokens": tokens, "seconds": seconds, "acceptance": acceptance}


def klspec_generate(target, prompt, flags, threads, n_predict):
    stats = generate_json(KLSPEC, target, prompt, ["-md", DRAFT, "-n", n_predict, "-t", threads] + OFFLOAD + flags)["stats"]
    return {"tokens": stats["emitted"], "seconds": stats["seconds"]["decode"], "acceptance": stats["acceptance_rate"]}


def pooled(runs):
    """One bench JSON over several passes of the same setting: counts and seconds summed, rates recomputed from
    them; `passes` keeps each pass's decode tokens/s."""
    if len(runs) == 1:
        return dict(runs[0], passes=[runs[0]["stats"]["tokens_per_second"]],
                    passes_throughput=[runs[0]["throughput_tokens_per_second"]])
    out = json.loads(json.dumps(runs[0]))
    s = out["stats"]
    for key, value in s.items():
        if isinstance(value, (int, float)) and key not in ("mat", "mean_draft_length", "acceptance_rate", "tokens_per_second",
                                                           "prompt_tokens_per_second"):
            s[key] = sum(r["stats"][key] for r in runs)
    s["seconds"] = {k: sum(r["stats"]["seconds"][k] for r in runs) for k in s["seconds"]}
    s["tokens_per_second"] = s["emitted"] / s["seconds"]["decode"]
    s["mat"] = s["emitted"] / s["target_calls"]
    s["mean_draft_length"] = s["draft_length_sum"] / s["target_calls"]
    wall = sum(r["wall_seconds"] for r in runs)
    out["throughput_tokens_per_second"] = sum(r["throughput_tokens_per_second"] * r["wall_seconds"] for r in runs) / wall
    out["wall_seconds"] = wall
    out["passes"] = [r["stats"]["tokens_per_second"] for r in runs]
    out["passes_throughput"] = [r["throughput_tokens_per_second"] for r in runs]
    return out


def rate(runs):
    return sum(r["tokens"] for r in runs) / sum(r["seconds"] for r in runs)


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def main():
    global KLSPEC, OFFLOAD, OFFLOAD_DRAFT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "speed.md")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "speed-report")
    ap.add_argument("--targets", default="default,F16,Q8_0,Q4_0,Q4_K_M")
    ap.add_argument("--limit-default", type=int, default=100, help="word problems on the default pair")
    ap.add_argument("--limit-grown", type=int, default=8, help="word problems on each grown target")
    ap.add_argument("--np-limit", type=int, default=16, help="word problems of the -np 8 runs (grown F16)")
    ap.add_argument("--tau", default="auto", help="KL threshold, or auto: the one `klspec calibrate` picks")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="llama-bench -r")
    ap.add_argument("--spec-prompts", type=int, default=3,
                    help="prompts of the llama-speculative-simple comparison (0: leave it out)")
    ap.add_argument("--passes", type=int, default=2, help="interleaved passes over the klspec bench settings, pooled")
    ap.add_argument("--fresh", action="store_true", help="measure everything again")
    ap.add_argument("--klspec", type=Path, default=KLSPEC, help="the klspec binary (a GPU build: build-gpu/klspec)")
    ap.add_argument("--ngl", type=int, default=0, help="layers offloaded to the GPU, both models, every run")
    ap.add_argument("--commit", help="the measured klspec's commit, for the header (default: the checkout's HEAD; "
                    "name it when --klspec is a copy built earlier)")
    ap.add_argument("--baseline", type=Path, help="another klspec binary (an earlier commit's): its automatic choice "
                    "runs beside the others as one more setting, 'auto (baseline)'")
    a = ap.parse_args()
    KLSPEC = a.klspec.resolve()
    OFFLOAD = ["-ngl", str(a.ngl)] if a.ngl else []
    OFFLOAD_DRAFT = ["-ngld", str(a.ngl)] if a.ngl else []
    if not KLSPEC.exists():
        sys.exit(f"speed_report: {KLSPEC} is missing: run scripts/build.sh first")
    store = Store(a.work, a.fresh)
    install = lb.default_llama_install()
    llama_bin, lib_path = install / "bin", str(install / "lib")
    lb.check_override(llama_bin / "llama-bench", lib_path)
    t = a.threads

    targets = {}
    for name in a.targets.split(","):
        if name == "default":
            targets[name] = DEFAULT_TARGET
        else:
            targets[name] = ROOT / "build" / "models" / GROWN.format(name)
    if any(not p.exists() for p in targets.values()):
        log("growing the benchmark targets (bench/grown_target/grow_target.py)")
        run([sys.executable, HERE.parent / "grown_target" / "grow_target.py", "--quantize", "Q8_0,Q4_0,Q4_K_M"])

    # 1. llama-bench cost curves.
    curves = {name: store.get(f"curve-{name}", lambda p=path: llama_curve(llama_bin / "llama-bench", lib_path, p, t, a.reps))
              for name, path in targets.items()}
    draft_curve = store.get("curve-draft", lambda: llama_curve(llama_bin / "llama-bench", lib_path, DRAFT, t, a.reps))

    # 2. calibrate τ for KL on the default pair at γ 8 (fixed, the paper's protocol), on the validation split.
    if a.tau == "auto":
        def calibrate():
            out_dir = a.work / "calibrate-word-validation-g8"
            cmd = [KLSPEC, "calibrate", "--dataset", WORDS_VALIDATION, "-t", t, "-np", 4, "-n", 384, "--draft-max", 8,
                   "--rule", "kl", "--values", "0.2,0.3,0.4,0.5", "--max-loss", "1%", "--out", out_dir, "--json"] + OFFLOAD
            report = json.loads(run(cmd).stdout)
            report["command"] = " ".join(map(str, cmd)).replace(str(ROOT) + "/", "")
            return report
        calibration = store.get("calibrate-word-validation-g8", calibrate)
        # "chosen" is "kl:TAU", or null when no value kept the loss within budget: then the smallest tried.
        chosen = calibration.get("chosen")
        tau = float(chosen.split(":")[1]) if chosen else 0.2
    else:
        calibration, tau = None, float(a.tau)

    # 3. klspec bench per target, and 4. -np 8 on the grown F16 target: --passes interleaved passes, each
    # running every setting once, odd passes in reverse order, so that a drift of the machine's speed (15 %
    # within 20 minutes has been seen) falls on every setting alike; the passes are pooled.
    configs = {"target-only": ["--draft-policy", "off"]}
    for g in GAMMAS:
        configs[f"vanilla γ {g}"] = ["--draft-policy", "fixed", "--draft-max", str(g)]
    configs["auto (default)"] = []
    np_configs = [("-np 1 auto", [], 1), ("-np 8 target-only", ["--draft-policy", "off"], 8),
                  ("-np 8 vanilla γ 8", ["--draft-policy", "fixed", "--draft-max", "8"], 8), ("-np 8 auto", [], 8)]
    binaries = {}  # label -> a binary other than --klspec
    if a.baseline:
        configs["auto (baseline)"] = []
        np_configs.append(("-np 8 auto (baseline)", [], 8))
        binaries = {"auto (baseline)": a.baseline.resolve(), "-np 8 auto (baseline)": a.baseline.resolve()}
    passes = {}  # (target, label) -> one bench JSON per pass
    best_gamma = {}

    def measure(key, label, thunk, p):
        passes.setdefault(key, []).append(store.get(f"{label}-pass{p}" if p else label, thunk))

    for p in range(a.passes):
        order = (lambda xs: xs) if p % 2 == 0 else (lambda xs: list(reversed(xs)))
        for name, path in targets.items():
            limit = a.limit_default if name == "default" else a.limit_grown
            labels = list(configs) + ["kl"]
            for label in order(labels):
                if label == "kl":
                    if name not in best_gamma:  # the first (forward) pass's best fixed γ, for every pass
                        best_gamma[name] = max(GAMMAS, key=lambda g: pooled(passes[(name, f"vanilla γ {g}")])["stats"]["tokens_per_second"])
                    g = best_gamma[name]
                    flags = ["--draft-policy", "fixed", "--draft-max", str(g), "--judge", "kl", "--judge-threshold", str(tau)]
                    measure((name, "kl"), f"bench-{name}-kl{tau}-g{g}-{limit}",
                            lambda p_=path, f=flags, l=limit: klspec_bench(p_, l, f, t), p)
                    continue
                measure((name, label), f"bench-{name}-{label}-{limit}",
                        lambda p_=path, f=configs[label], l=limit, b=binaries.get(label): klspec_bench(p_, l, f, t, binary=b), p)
        if "F16" in targets:
            for label, flags, par in order(np_configs):
                measure(("np", label), f"np-F16-{label}-{a.np_limit}",
                        lambda f=flags, q=par, b=binaries.get(label): klspec_bench(targets["F16"], a.np_limit, f, t, parallel=q, binary=b), p)
    results = {key: pooled(runs) for key, runs in passes.items()}
    for name in targets:
        results[(name, "best γ")] = best_gamma[name]
    np_rows = {label: results[("np", label)] for label, _, _ in np_configs if ("np", label) in results}

    # 5. llama-speculative-simple against klspec on the same prompts.
    spec_rows = {}  # none with --spec-prompts 0
    for name, path in targets.items():
        for g in GAMMAS:
            spec_rows[(name, f"llama-speculative-simple γ {g}")] = [
                store.get(f"lss-{name}-g{g}-{i}", lambda p=path, q=q, g=g: speculative_simple(llama_bin, p, q, g, t, 256))
                for i, q in enumerate(prompts(a.spec_prompts))]
            spec_rows[(name, f"klspec vanilla γ {g}")] = [
                store.get(f"gen-{name}-g{g}-{i}", lambda p=path, q=q, g=g: klspec_generate(
                    p, q, ["--draft-policy", "fixed", "--draft-max", str(g)], t, 256))
                for i, q in enumerate(prompts(a.spec_prompts))]
        spec_rows[(name, "klspec auto")] = [
            store.get(f"gen-{name}-auto-{i}", lambda p=path, q=q: klspec_generate(p, q, [], t, 256))
            for i, q in enumerate(prompts(a.spec_prompts))]

    write_report(a, targets, curves, draft_curve, results, configs, tau, calibration, np_rows, spec_rows)


def write_report(a, targets, curves, draft_curve, results, configs, tau, calibration, np_rows, spec_rows):
    commit = a.commit or checkout_commit()
    L = ["# Speed", "",
         "What speculation gains on this machine, per weight type of the target, every ratio measured side by side",
         "in one run (the real Qwen2.5-Coder pair has its own report: `docs/speed-real-pair.md`). Regenerate",
         "(25-50 minutes a pass on 2 cores, by CPU; resumes when interrupted):", "",
         "```", "/usr/bin/python3 bench/speed/speed_report.py", "```", "",
         f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, klspec {commit}, pinned llama.cpp de3ff815 "
         f"(llamafile sgemm on, as the default build), `-t {a.threads}`:", ""]
    L += cpu_header() + [""]
    if a.baseline:
        L += [f"`auto (baseline)` rows: the same runs with another build, `{a.baseline.name}`, interleaved with the rest.", ""]
    t_draft = draft_curve["1"]
    L += ["## Cost of a batch (llama-bench)", "",
          f"Milliseconds for one decode of b tokens (`llama-bench -p b -n 0`, median of {a.reps}); the draft "
          f"(`models/testbed-draft.gguf`) costs {t_draft:.3f} ms a token.", "",
          "| target | size | " + " | ".join(f"b={b}" for b in BATCHES) + " | t₉/t₁ | t₁₇/t₁ |",
          "|---|---|" + "---:|" * (len(BATCHES) + 2)]
    for name, path in targets.items():
        c = curves[name]
        size = path.stat().st_size / 2**20
        L.append(f"| {name} | {size:.0f} MiB | " + " | ".join(fmt(c[str(b)], 2) for b in BATCHES) +
                 f" | {c['9'] / c['1']:.2f}× | {c['17'] / c['1']:.2f}× |")
    L += ["", "## Decoding the word problems (`klspec bench`)", "",
          f"Decode tokens/s (emitted / decode time, prompts excluded) and throughput (all tokens over wall time, "
          f"prompts and the automatic choice's calibration included); speedup = decode tokens/s over target-only's. "
          f"Default pair: the first {a.limit_default} problems; grown targets: the first {a.limit_grown}. "
          f"Ceiling = MAT(γ)·t₁ / (t_(γ+1) + γ·t_draft) from the llama-bench curve above (t₅, t₉, t₁₇), a speedup "
          f"over llama-bench's own one-token decode; \"of ceiling\" compares decode tokens/s with the ceiling's "
          f"MAT(γ) / (t_(γ+1) + γ·t_draft).", ""]
    L += ["| target | setting | decode tok/s | speedup | ceiling | of ceiling | throughput | MAT | mean γ | target-only steps | accuracy |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    summary = {}
    for name in targets:
        c = curves[name]
        base = results[(name, "target-only")]["stats"]["tokens_per_second"]
        best_fixed = max(results[(name, f"vanilla γ {g}")]["stats"]["tokens_per_second"] for g in GAMMAS)
        for label in list(configs) + ["kl"]:
            r = results[(name, label)]
            s = r["stats"]
            g = None
            if label.startswith("vanilla γ"):
                g = int(label.split()[-1])
            ceiling = ceiling_tps = None
            if g is not None:
                ceiling = s["mat"] * c["1"] / (c[str(g + 1)] + g * t_draft)
                ceiling_tps = 1e3 * s["mat"] / (c[str(g + 1)] + g * t_draft)
            speedup = s["tokens_per_second"] / base
            acc = r.get("accuracy", {}).get("rate")
            shown = label if label != "kl" else f"KL τ {tau} (γ {results[(name, 'best γ')]})"
            of_ceiling = 100 * s["tokens_per_second"] / ceiling_tps if ceiling_tps else None
            L.append(f"| {name} | {shown} | {s['tokens_per_second']:.1f} | {speedup:.2f}× | {fmt(ceiling, 2)}"
                     f"{'×' if ceiling else ''} | {fmt(of_ceiling, 0)}{' %' if ceiling else ''} | "
                     f"{r['throughput_tokens_per_second']:.1f} | {s['mat']:.2f} | {s['mean_draft_length']:.2f} | "
                     f"{s['target_only_steps']} | {fmt(100 * acc if acc is not None else None, 1)} |")
        auto = results[(name, "auto (default)")]
        bg = results[(name, "best γ")]
        van, kl = results[(name, f"vanilla γ {bg}")]["stats"], results[(name, "kl")]["stats"]
        per_pass = [auto["passes"][i] / max(results[(name, f"vanilla γ {g}")]["passes"][i] for g in GAMMAS)
                    for i in range(len(auto["passes"]))]
        baseline = results.get((name, "auto (baseline)"))
        summary[name] = {"auto_vs_best": auto["stats"]["tokens_per_second"] / best_fixed, "auto_vs_best_per_pass": per_pass,
                         "baseline_vs_best": baseline["stats"]["tokens_per_second"] / best_fixed if baseline else None,
                         "baseline_vs_target_only": baseline["stats"]["tokens_per_second"] / base if baseline else None,
                         "auto_vs_target_only": auto["stats"]["tokens_per_second"] / base,
                         "kl_speed_over_mat": (kl["tokens_per_second"] / van["tokens_per_second"]) / (kl["mat"] / van["mat"])}
    L += ["", f"Goals, per target: the automatic choice against the best fixed γ (≥ 95 %) and target-only (≥ 98 %), "
          f"pooled over the {a.passes} interleaved passes (each pass's own ratio beside it); KL's speed gain over "
          "vanilla against its MAT gain (≥ 0.9):", "",
          "| target | auto / best fixed γ | per pass | auto / target-only | (KL ÷ vanilla tok/s) ÷ (KL ÷ vanilla MAT) |"
          + (" baseline auto / best fixed γ | baseline auto / target-only |" if a.baseline else ""),
          "|---|---:|---:|---:|---:|" + ("---:|---:|" if a.baseline else "")]
    for name, s in summary.items():
        L.append(f"| {name} | {100 * s['auto_vs_best']:.0f} % | "
                 f"{' / '.join(f'{100 * x:.0f} %' for x in s['auto_vs_best_per_pass'])} | "
                 f"{100 * s['auto_vs_target_only']:.0f} % | {s['kl_speed_over_mat']:.2f} |" +
                 (f" {100 * s['baseline_vs_best']:.0f} % | {100 * s['baseline_vs_target_only']:.0f} % |" if a.baseline else ""))
    if calibration is not None:
        L += ["", f"τ = {tau}: `{calibration.get('command', 'klspec calibrate')}` (default pair, γ 8). Its report:", "",
              "```json", json.dumps({k: v for k, v in calibration.items() if k != "command"}, indent=1)[:3000], "```"]
    if np_rows:
        L += ["", f"## Many sequences (grown F16, the first {a.np_limit} problems)", "",
              "| setting | throughput tok/s | MAT | mean γ | target-only steps | accuracy |", "|---|---:|---:|---:|---:|---:|"]
        for label, r in np_rows.items():
            s = r["stats"]
            acc = r.get("accuracy", {}).get("rate")
            L.append(f"| {label} | {r['throughput_tokens_per_second']:.1f} | {s['mat']:.2f} | {s['mean_draft_length']:.2f} | "
                     f"{s['target_only_steps']} | {fmt(100 * acc if acc is not None else None, 1)} |")
        fixed = np_rows.get("-np 8 vanilla γ 8")
        for label in ("-np 8 auto", "-np 8 auto (baseline)"):
            auto = np_rows.get(label)
            if not auto or not fixed:
                continue
            per_pass = " / ".join(f"{x / y:.2f}×" for x, y in zip(auto["passes_throughput"], fixed["passes_throughput"]))
            L += ["", f"Goal: `{label}` ≥ vanilla γ 8: {auto['throughput_tokens_per_second'] / fixed['throughput_tokens_per_second']:.2f}× "
                  f"pooled ({per_pass} per pass)."]
    if a.spec_prompts > 0:
        L += ["", f"## Against llama.cpp's speculative example (the first {a.spec_prompts} word problems, -n 256)", "",
              "Decode tokens/s as each program reports it (`llama-speculative-simple --spec-type draft-simple "
              "--spec-draft-n-min 0 --temp 0`; `klspec generate --json`'s decode time).", "",
              "| target | " + " | ".join(f"llama γ {g}" for g in GAMMAS) + " | " + " | ".join(f"klspec γ {g}" for g in GAMMAS) +
              " | klspec auto | klspec best / llama best |", "|---|" + "---:|" * (2 * len(GAMMAS) + 2)]
    for name in targets if a.spec_prompts > 0 else []:
        llama = [rate(spec_rows[(name, f"llama-speculative-simple γ {g}")]) for g in GAMMAS]
        ours = [rate(spec_rows[(name, f"klspec vanilla γ {g}")]) for g in GAMMAS]
        auto = rate(spec_rows[(name, "klspec auto")])
        L.append(f"| {name} | " + " | ".join(f"{x:.1f}" for x in llama) + " | " + " | ".join(f"{x:.1f}" for x in ours) +
                 f" | {auto:.1f} | {max(ours + [auto]) / max(llama):.2f}× |")
    L += ["", "## Commands", "", "```"]
    seen = []
    for r in list(results.values()) + list(np_rows.values()):
        if isinstance(r, dict) and r.get("command") and r["command"] not in seen:
            seen.append(r["command"])
    L += seen + ["```", ""]
    a.out.write_text("\n".join(L))
    log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
