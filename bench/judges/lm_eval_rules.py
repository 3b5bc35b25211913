#!/usr/bin/env python3
"""Judge rules through lm-evaluation-harness: for each rule, a fresh `klspec serve` (so its /metrics count that run
alone), one `lm_eval` run of a generation task with the rule in --gen_kwargs, and the harness's score beside the
server's MAT; each rule's answers paired with vanilla's (agreement, paired accuracy change). Resumes: a rule whose
result file exists in --out is not run again.

  python3 bench/judges/lm_eval_rules.py --tasks klspec_testbed_word --limit 60 --rules vanilla kl:0.1 kl:0.3 kl:1 topk:4 \\
      --out ~/.cache/klspec/lm-eval-rules/testbed-word
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: bench_common, llama_bench_lib
from bench_common import DEFAULT_KLSPEC, ROOT, TESTBED_DRAFT, TESTBED_TARGET, Server, cpu_header, wilson  # noqa: E402


def gen_kwargs(setting):
    """--gen_kwargs of a setting: vanilla, kl:TAU, topk:K or RULE:THRESHOLD."""
    rule, _, value = setting.partition(":")
    if rule == "vanilla":
        return "judge=vanilla"
    if rule == "topk":
        return f"judge=topk,judge_topk={value}"
    return f"judge={rule},judge_threshold={value}"


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}


def run_rule(args, python, setting, out):
    server_cmd = [args.klspec, "serve", "-m", args.model, "-md", args.model_draft, "-t", str(args.threads),
                  "--draft-max", str(args.draft_max), "--draft-policy", "fixed", *args.server_args]
    with Server(server_cmd, name="klspec serve") as server:
        model_args = (f"base_url={server.url}/v1/completions,tokenizer_backend=remote,tokenized_requests=False,"
                      f"num_concurrent=1,max_retries=1")
        run_dir = out / f"lm_eval-{setting.replace(':', '_')}"
        command = [python, "-m", "lm_eval", "--model", "local-completions", "--model_args", model_args,
                   "--tasks", args.tasks, "--include_path", str(ROOT / "tools/lm_eval/tasks"), "--limit", str(args.limit),
                   "--log_samples", "--output_path", str(run_dir), "--gen_kwargs", gen_kwargs(setting)]
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"lm_eval_rules: lm_eval failed for {setting}:\n{done.stderr[-3000:]}")
        served = metrics(server.url)
    (results_file,) = run_dir.glob("*/results_*.json")
    (samples_file,) = run_dir.glob("*/samples_*.jsonl")
    samples = sorted((json.loads(line) for line in samples_file.open()), key=lambda s: s["doc_id"])
    result = {"setting": setting,
              "scores": json.loads(results_file.read_text())["results"][args.tasks],
              "mat": served["klspec:spec_decode_mean_accepted_tokens"],
              "relaxed": served["klspec:spec_decode_num_relaxed_accepted_tokens_total"],
              "answers": [s["filtered_resps"][0] for s in samples],
              "correct": [s[args.metric] for s in samples]}
    (out / f"{setting.replace(':', '_')}.json").write_text(json.dumps(result))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--klspec", default=str(DEFAULT_KLSPEC))
    parser.add_argument("-m", "--model", default=str(TESTBED_TARGET))
    parser.add_argument("-md", "--model-draft", default=str(TESTBED_DRAFT))
    parser.add_argument("--tasks", default="klspec_testbed_word", help="one generation task of tools/lm_eval/tasks")
    parser.add_argument("--metric", default="exact_match", help="the per-sample metric the task logs")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--rules", nargs="+", default=["vanilla", "kl:0.1", "kl:0.3", "kl:1", "topk:4"])
    parser.add_argument("--draft-max", type=int, default=4)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--server-args", nargs="*", default=[], help="more `klspec serve` flags (e.g. --no-repack)")
    parser.add_argument("--out", required=True, help="directory for each rule's result (resumes)")
    args = parser.parse_args()
    if "vanilla" not in args.rules:
        args.rules.insert(0, "vanilla")
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    python = subprocess.run(["bash", str(ROOT / "scripts/setup-lm-eval.sh")], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    results = {}
    for setting in args.rules:
        saved = out / f"{setting.replace(':', '_')}.json"
        results[setting] = json.loads(saved.read_text()) if saved.exists() else run_rule(args, python, setting, out)
        print(f"lm_eval_rules: {setting} done", file=sys.stderr)

    vanilla = results["vanilla"]
    print("\n".join(cpu_header()))
    print(f"\n{args.tasks}, first {args.limit} problems, greedy, γ {args.draft_max} fixed, `{Path(args.model).name}` "
          f"+ `{Path(args.model_draft).name}`\n")
    print(f"| rule | {args.metric} | paired change vs vanilla | same answer as vanilla [95 % Wilson] | MAT | × vanilla's MAT |")
    print("|---|---:|---:|---|---:|---:|")
    for setting, result in results.items():
        n = len(result["correct"])
        accuracy = sum(result["correct"]) / n
        change = accuracy - sum(vanilla["correct"]) / n
        same = sum(a == b for a, b in zip(result["answers"], vanilla["answers"]))
        low, high = wilson(same, n)
        agreement = "—" if setting == "vanilla" else f"{100 * same / n:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"
        print(f"| {setting} | {100 * accuracy:.1f} % | {100 * change:+.1f} | {agreement} | {result['mat']:.2f} | "
              f"{result['mat'] / vanilla['mat']:.2f} |")


if __name__ == "__main__":
    main()
