#!/usr/bin/python3
"""The real pair's speed report: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) with its 0.5B sibling as shipped and the
cheaper drafts made from it (bench/model_pairs/real_pair_drafts.sh), every ratio measured side by side in one run on
this machine. Writes docs/speed-real-pair.md.

  /usr/bin/python3 bench/speed/real_pair_speed.py [--limit 2] [--passes 2] [-n 384] [--gammas 2,4,8] [--tau 1]
      [--work ~/.cache/klspec/real-pair-speed] [--out docs/speed-real-pair.md] [--fresh] [--klspec build/klspec]
      [--commit HASH]

  * The cost of a batch: llama-bench's curve (one decode of b = 1, 2, 3, 5, 9, 17 tokens; llama.cpp repacks the
    weights) for the target, and each draft's one token; and klspec's own costs from its cost traces (the target
    unrepacked, klspec's default, so that verification gives one-token logits bit for bit: docs/real-pair.md).
  * `klspec bench` on the first --limit HumanEval and MBPP+ problems (EvalPlus's chat prompts, greedy, -t 2): target-only
    (unrepacked and repacked), the automatic γ and each fixed γ with the shipped and the Q4_0 draft, KL at --tau,
    n-gram drafting alone and before the draft, and a draft the target never accepts (the shipped draft's rows
    shuffled). --passes interleaved passes, odd ones in reverse order, pooled. Per setting: decode tokens/s,
    prompt time, MAT, and how many answers equal target-only's; for each fixed γ the ceiling
    MAT·t₁ / (t_verify(γ+1) + γ·t_draft) from klspec's own step costs in the same run.
  * llama-speculative-simple at each γ, and llama-server with the draft (γ 3, its default, and each γ) and without,
    on the same prompts (the outputs rows' `prompt`), against `klspec generate` on them.
Each measurement is kept as JSON under --work and reused by a rerun (--fresh measures again): an interrupted
report resumes.
"""
import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "lib"))  # bench/lib: bench_common, llama_bench_lib
sys.path.insert(0, str(HERE))
import llama_bench_lib as lb  # noqa: E402
from bench_common import Server, checkout_commit, cpu_header, fetch_real_model, llama_server_args, llama_speculative_simple, run  # noqa: E402
from speed_report import Store, llama_curve, log, pooled  # noqa: E402

DATASETS = ["humaneval", "mbpp-plus"]
NGRAM = ["--spec-ngram-size-n", "2", "--spec-ngram-size-m", "16"]


def settings(drafts, gammas, tau, best):
    """(label, draft name or None, klspec flags) of every `klspec bench` setting; `best` is the fastest lossless
    (draft, γ) of the first pass, where KL runs (None before it is known)."""
    rows = [("target-only", None, ["--draft-policy", "off"]),
            ("target-only, repacked", None, ["--draft-policy", "off", "--repack"])]
    for name in ("0.5B", "0.5B Q4_0"):
        rows.append((f"auto, {name}", name, []))
        rows += [(f"γ {g}, {name}", name, ["--draft-policy", "fixed", "--draft-max", str(g)]) for g in gammas]
    rows += [("n-gram alone, auto", None, ["--spec-type", "ngram-simple", *NGRAM]),
             ("n-gram → 0.5B Q4_0, auto", "0.5B Q4_0", ["--spec-type", "ngram-simple,draft-simple", *NGRAM]),
             ("auto, never-accepted draft", "shuffled", [])]
    if best:
        name, g = best
        rows.append((f"KL τ {tau}, γ {g}, {name}", name,
                     ["--draft-policy", "fixed", "--draft-max", str(g), "--judge", "kl", "--judge-threshold", str(tau)]))
    return [r for r in rows if r[1] is None or r[1] in drafts]


def bench_setting(a, target, drafts, label, draft, flags, dataset, pass_index):
    """One `klspec bench` run; its JSON with the outputs' texts and prompts and the cost trace's steps."""
    stem = a.work / f"{label}-{dataset}-{pass_index}".replace(" ", "_").replace(",", "").replace("→", "to")
    cmd = [a.klspec, "bench", "-m", target, "--dataset", dataset, "--data-dir", a.data_dir, "--limit", a.limit,
           "-n", a.n, "-t", 2, "--json", "--outputs", f"{stem}.jsonl", "--cost-trace", f"{stem}.cost.jsonl", *flags]
    if draft:
        cmd += ["-md", drafts[draft]]
    out = json.loads(run(cmd).stdout)
    out["command"] = " ".join(map(str, cmd)).replace(str(ROOT) + "/", "").replace(str(Path.home()), "~")
    rows = [json.loads(line) for line in Path(f"{stem}.jsonl").read_text().splitlines()]
    out["texts"] = {r["id"]: r["text"] for r in rows}
    out["prompts"] = {r["id"]: r["prompt"] for r in rows}
    out["steps"] = [json.loads(line) for line in Path(f"{stem}.cost.jsonl").read_text().splitlines()]
    return out


def merged(runs):
    """One pooled bench JSON over datasets and passes, keeping texts (pass 0's) and every step."""
    out = pooled(runs)
    out["texts"] = {k: v for r in runs for k, v in r["texts"].items()}
    out["steps"] = [s for r in runs for s in r["steps"]]
    return out


def engine_costs(result, gamma):
    """Target ms of a verification of γ + 1 tokens (steps that drafted exactly γ) and draft ms per drafted token."""
    full = [s["verify_ms"] for s in result["steps"] if max(s["lengths"]) == gamma]
    drafted = sum(sum(s["lengths"]) for s in result["steps"])
    draft_ms = sum(s["draft_ms"] for s in result["steps"])
    return (statistics.median(full) if full else None), (draft_ms / drafted if drafted else None)


def server_rate(binary_args, prompt, n_predict):
    """Decode tokens/s and prompt ms of one greedy /completion on a fresh llama-server."""
    with Server(binary_args, name="llama-server", timeout=300) as server:
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0, "cache_prompt": False}).encode()
        request = urllib.request.Request(server.url + "/completion", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=1200) as response:
            timings = json.loads(response.read())["timings"]
    return {"tokens": timings["predicted_n"], "seconds": timings["predicted_ms"] / 1e3, "prompt_ms": timings["prompt_ms"]}


def generate_rate(a, target, drafts, prompt, flags, draft):
    cmd = [a.klspec, "generate", "-m", target, "-p", prompt, "-n", a.n_side, "-t", 2, "--json", *flags]
    if draft:
        cmd += ["-md", drafts[draft]]
    s = json.loads(run(cmd).stdout)["stats"]
    return {"tokens": s["emitted"], "seconds": s["seconds"]["decode"], "prompt_ms": 1e3 * s["seconds"]["prompt"]}


def decode_rate(bench_runs):
    """Decode tokens/s over several bench runs: emitted over decode seconds, summed."""
    return (sum(r["stats"]["emitted"] for r in bench_runs) /
            sum(r["stats"]["seconds"]["decode"] for r in bench_runs))


def rate(runs):
    return sum(r["tokens"] for r in runs) / sum(r["seconds"] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=2, help="problems of each benchmark")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("-n", type=int, default=384, help="klspec bench's -n (answers end at their closing fence)")
    ap.add_argument("--n-side", type=int, default=128, help="tokens of the side-by-side runs against llama.cpp")
    ap.add_argument("--gammas", default="2,4,8")
    ap.add_argument("--tau", type=float, default=1.0, help="KL's threshold (the paper's τ scale)")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "klspec" / "real-pair-speed")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "speed-real-pair.md")
    ap.add_argument("--klspec", type=Path, default=ROOT / "build" / "klspec")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--commit", help="the measured klspec's commit, for the header (default: the checkout's HEAD; name "
                    "it when the kept measurements came from an earlier build)")
    a = ap.parse_args()
    gammas = [int(g) for g in a.gammas.split(",")]
    if not a.klspec.exists():
        sys.exit(f"real_pair_speed: {a.klspec} is missing: run scripts/build.sh first")
    store = Store(a.work, a.fresh)
    target = fetch_real_model("qwen2.5-coder-1.5b")
    made = Path(run(["bash", ROOT / "bench" / "model_pairs" / "real_pair_drafts.sh"]).stdout.strip().splitlines()[-1])
    drafts = {"0.5B": fetch_real_model("qwen2.5-coder-0.5b"), "0.5B Q4_0": made / "draft-q4_0.gguf",
              "shuffled": made / "draft-shuffled.gguf"}
    install = lb.default_llama_install()
    llama_bin, lib_path = install / "bin", str(install / "lib")

    curves = {"target": store.get("curve-target", lambda: llama_curve(llama_bin / "llama-bench", lib_path, target, 2, 3))}
    for name in ("0.5B", "0.5B Q4_0"):
        curves[name] = store.get(f"curve-{name}", lambda p=drafts[name]: llama_curve(llama_bin / "llama-bench", lib_path, p, 2, 3))

    runs = {}  # (label, pass) -> one bench JSON per dataset

    def measure(label, draft, flags, p):
        runs[(label, p)] = [store.get(f"bench-{label}-{dataset}-{p}", lambda ds=dataset: bench_setting(
            a, target, drafts, label, draft, flags, ds, p)) for dataset in DATASETS]

    best = None  # the fastest lossless (draft, γ) of the first pass: KL runs there, from the next pass on
    for p in range(a.passes):
        rows = settings(drafts, gammas, a.tau, best)
        for label, draft, flags in (rows if p % 2 == 0 else rows[::-1]):
            measure(label, draft, flags, p)
        if best is None:
            best = max(((n, g) for n in ("0.5B", "0.5B Q4_0") for g in gammas),
                       key=lambda ng: decode_rate(runs[(f"γ {ng[1]}, {ng[0]}", 0)]))
            if a.passes == 1:
                measure(*settings(drafts, gammas, a.tau, best)[-1], 0)
    results = {}
    for (label, _), bench_runs in runs.items():
        results.setdefault(label, []).extend(bench_runs)
    results = {label: merged(bench_runs) for label, bench_runs in results.items()}
    per_pass = {label: [decode_rate(runs[(label, p)]) / decode_rate(runs[("target-only", p)])
                        for p in range(a.passes) if (label, p) in runs] for label in results}

    # Side by side with llama.cpp's programs, on the first problem of each benchmark as klspec prompted it.
    prompts = [next(iter(r["prompts"].values())) for r in runs[("target-only", 0)]]
    side = {}
    for i, prompt in enumerate(prompts):
        def keep(key, thunk):
            side.setdefault(key, []).append(store.get(f"side-{key}-{i}", thunk))
        keep("klspec target-only", lambda q=prompt: generate_rate(a, target, drafts, q, ["--draft-policy", "off"], None))
        keep("klspec auto", lambda q=prompt: generate_rate(a, target, drafts, q, [], "0.5B"))
        keep("llama-server, no draft", lambda q=prompt: server_rate(
            [llama_bin / "llama-server", "-m", target, "-c", 4096, "-t", 2, "--no-webui"], q, a.n_side))
        for g in sorted({3, *gammas}):
            keep(f"klspec γ {g}", lambda q=prompt, g=g: generate_rate(
                a, target, drafts, q, ["--draft-policy", "fixed", "--draft-max", str(g)], "0.5B"))
            keep(f"llama-server γ {g}", lambda q=prompt, g=g: server_rate(
                [llama_bin / "llama-server", *llama_server_args(target, drafts["0.5B"], 1, 4096, 2, g).split()], q, a.n_side))
            keep(f"llama-speculative-simple γ {g}", lambda q=prompt, g=g: dict(zip(("tokens", "seconds", "acceptance"), llama_speculative_simple(
                llama_bin, target, drafts["0.5B"], q, g, 2, a.n_side, ["-c", "4096"]))))
    write_report(a, curves, results, per_pass, side, gammas)


def write_report(a, curves, results, per_pass, side, gammas):
    commit = a.commit or checkout_commit()
    base = results["target-only"]
    t1 = 1e3 * base["stats"]["seconds"]["decode"] / base["stats"]["emitted"]
    tps = {label: r["stats"]["tokens_per_second"] for label, r in results.items()}
    L = ["# Speed on the real pair", "",
         "What speculation gains with Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) as the target and its 0.5B sibling as the draft",
         "(as shipped, and requantized to Q4_0 by `bench/model_pairs/real_pair_drafts.sh`), every ratio measured side by side",
         "in one run on this machine. Regenerate (half an hour on 2 cores at --limit 1; resumes when interrupted):", "",
         "```", "/usr/bin/python3 bench/speed/real_pair_speed.py", "```", "",
         f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from measurements of klspec {commit} "
         "(kept under --work), pinned llama.cpp de3ff815, "
         f"`-t 2`, the first {a.limit} HumanEval and MBPP+ problems (EvalPlus's chat prompts, greedy, -n {a.n}), "
         f"{a.passes} interleaved passes, the machine otherwise idle:", ""]
    L += cpu_header() + [""]
    c = curves["target"]
    L += ["## Cost of a batch", "",
          "llama-bench (`-p b -n 0`, median of 3; llama.cpp repacks the target's Q4_K weights for its interleaved kernels):", "",
          "| model | b=1 ms | " + " | ".join(f"t{b}/t1" for b in (2, 3, 5, 9, 17)) + " |", "|---|---:|" + "---:|" * 5,
          f"| target | {c['1']:.1f} | " + " | ".join(f"{c[str(b)] / c['1']:.2f}" for b in (2, 3, 5, 9, 17)) + " |"]
    for name in ("0.5B", "0.5B Q4_0"):
        L.append(f"| draft {name} | {curves[name]['1']:.1f} (× target {curves[name]['1'] / c['1']:.2f}) | | | | | |")
    L += ["", f"klspec's own, from the cost traces of the fixed-γ runs below (target unrepacked, klspec's default): one token "
          f"{t1:.1f} ms (target-only decoding)", "",
          "| draft | γ | verification of γ + 1 tokens, ms (× t₁) | draft ms per drafted token, its catch-up of the prompt included (× t₁) |", "|---|---:|---:|---:|"]
    ceilings = {}
    for name in ("0.5B", "0.5B Q4_0"):
        for g in gammas:
            r = results.get(f"γ {g}, {name}")
            if not r:
                continue
            verify, draft = engine_costs(r, g)
            if verify and draft:
                ceilings[(name, g)] = r["stats"]["mat"] * t1 / (verify + g * draft)
                L.append(f"| {name} | {g} | {verify:.0f} ({verify / t1:.2f}×) | {draft:.1f} ({draft / t1:.2f}×) |")
    L += ["", "## klspec bench", "",
          "Decode tokens/s (emitted over decode time, prompts excluded), speedup over target-only's, the ceiling "
          "MAT·t₁ / (t_verify(γ+1) + γ·t_draft) from the costs above and the share of it reached, prompt time against "
          "target-only's, and the answers equal to target-only's (greedy exactness; KL may change them).", "",
          "| setting | decode tok/s | speedup | per pass | ceiling | of ceiling | prompt time | MAT | acceptance | mean γ | answers = target-only |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, r in results.items():
        s = r["stats"]
        ratios = per_pass[label]
        g = next((g for g in gammas if label.startswith(f"γ {g},")), None)
        name = label.split(", ", 1)[1] if g else None
        ceiling = ceilings.get((name, g))
        equal = sum(r["texts"].get(i) == t for i, t in base["texts"].items())
        L.append(f"| {label} | {s['tokens_per_second']:.2f} | {tps[label] / tps['target-only']:.2f}× | "
                 + " / ".join(f"{x:.2f}" for x in ratios) + " | "
                 + (f"{ceiling:.2f}× | {100 * (tps[label] / tps['target-only']) / ceiling:.0f} % |" if ceiling else "— | — |")
                 + f" {s['seconds']['prompt'] / base['stats']['seconds']['prompt']:.2f}× | {s['mat']:.2f} | "
                 f"{100 * s['acceptance_rate']:.0f} % | {s['mean_draft_length']:.2f} | {equal} of {len(base['texts'])} |")
    L += ["", "## Against llama.cpp on the same prompts", "",
          f"The first problem of each benchmark as klspec prompted it (the outputs rows' `prompt`), -n {a.n_side}, greedy, "
          "the shipped draft; decode tokens/s as each program reports it. llama.cpp repacks the target, klspec does not.", "",
          "| program, setting | decode tok/s | × llama-server without a draft |", "|---|---:|---:|"]
    ref = rate(side["llama-server, no draft"])
    for key, runs in side.items():
        L.append(f"| {key} | {rate(runs):.2f} | {rate(runs) / ref:.2f}× |")
    llama_best = max(rate(v) for k, v in side.items() if k.startswith(("llama-speculative-simple", "llama-server γ")))
    auto = [k for k in results if k.startswith("auto, ")]
    lossless = [k for k in results if k.startswith(("γ ", "n-gram"))]
    kl = [k for k in results if k.startswith("KL")]
    L += ["", "## Goals", "", "| goal | measured | met |", "|---|---:|---|"]

    def goal(text, value, ok):
        L.append(f"| {text} | {value} | {'yes' if ok else 'no'} |")
    for k in auto:
        speed = tps[k] / tps["target-only"]
        prompt = results[k]["stats"]["seconds"]["prompt"] / base["stats"]["seconds"]["prompt"]
        need = 0.95 if "never" in k else 1.00
        goal(f"{k}: decoding ≥ {need:.2f}× target-only, prompt time ≤ 1.05×", f"{speed:.2f}×, {prompt:.2f}×",
             speed >= need and prompt <= 1.05)
    top = max(lossless, key=lambda k: tps[k])
    goal(f"lossless ≥ 1.2× target-only (best: {top})", f"{tps[top] / tps['target-only']:.2f}×", tps[top] / tps["target-only"] >= 1.2)
    for k in kl:
        goal(f"{k} ≥ 1.4× target-only", f"{tps[k] / tps['target-only']:.2f}×", tps[k] / tps["target-only"] >= 1.4)
    ours = rate(side["klspec auto"])
    goal("klspec's default ≥ 1.5× llama.cpp's best γ (same prompts)", f"{ours / llama_best:.2f}×", ours / llama_best >= 1.5)
    L += ["", "## Commands", "", "```"] + [r["command"] for r in results.values()] + ["```", ""]
    a.out.write_text("\n".join(L))
    log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
