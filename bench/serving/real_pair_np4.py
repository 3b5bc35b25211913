#!/usr/bin/python3
"""Serving four clients at once on the real pair (the issue "Speculation that pays on a CPU …": `-np 4` serving
≥ 1.0× llama-server without a draft): Qwen2.5-Coder-1.5B-Instruct with its 0.5B sibling as shipped.

  /usr/bin/python3 bench/serving/real_pair_np4.py [--passes 2] [--requests 16] [--max-tokens 128]
      [--klspec build/klspec] [--work ~/.cache/klspec/real-pair-np4] [--no-llama-draft] [--servers WORDS]
      [--also OPTIONS] [--llama-also OPTIONS] [--baseline-klspec BINARY] [--clients 4] [--draft FILE] [--alternate]
      [--json]

Four streaming clients (--clients; bench/serving/serve_load.py) send the first 8 HumanEval problems in EvalPlus's chat
prompt (as `klspec bench` renders them), greedy, to each server in turn, every server started alike with 4 slots
and `-t 2`:
  * klspec serve with the draft at its defaults (the automatic γ; the target repacked, exact with klspec's patched
    ggml: docs/repacked-kernels.md);
  * klspec serve without a draft (what the draft's prefills and probes cost the defaults);
  * the same with --no-repack (the plain kernels: the exact mode before the patch);
  * llama-server without a draft, and with the draft (`--spec-type draft-simple`, γ 3, its default).
--passes interleaved passes, the second in reverse order; the table gives each pass's tokens/s (all clients'
tokens over the wall time), the ratio to llama-server without a draft in the same pass, and the server's CPU time
over the wall time (cores busy: its threads' spin-waiting counts as busy).

--alternate: all servers start at once and take turns, a load of --requests each (say one per client), --passes
times, the order reversed every other turn, each turn on the next prompts of the eight. On a machine whose speed
drifts for minutes at a time (a shared host), turns of a few seconds put both sides of a ratio in the same spell,
where whole passes of minutes do not. Servers waiting for their turn sleep.
"""
import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "lib"))
from bench_common import Server, cpu_header, fetch_real_model, pinned_llama_server, run  # noqa: E402

def llama_server_binary():
    found = pinned_llama_server()
    if not found:
        sys.exit("real_pair_np4: no llama-server under ~/.cache/klspec (bash scripts/build.sh builds it)")
    return found


def rendered_prompts(klspec, target, work):
    """The first 8 HumanEval chat prompts as klspec renders them (one token decoded each, to get them written)."""
    path = work / "prompts.jsonl"
    if not path.exists():
        run([klspec, "bench", "-m", target, "--dataset", "humaneval", "--limit", "8", "-n", "1", "-t", "2",
             "--data-dir", ROOT.parent / "shared/datasets", "--outputs", path])
    return path


def servers(klspec, llama_server, target, draft):
    slots = ["-np", "4", "-t", "2"]
    serve = [klspec, "serve", "-m", target, *slots, "-c", "1024"]
    return {
        "klspec serve, draft, defaults": [*serve, "-md", draft],
        "klspec serve, no draft": serve,
        "klspec serve, draft, --no-repack": [*serve, "-md", draft, "--no-repack"],
        "llama-server, no draft": [llama_server, "-m", target, *slots, "-c", "4096", "--no-webui"],
        "llama-server, draft γ 3": [llama_server, "-m", target, "-md", draft, "--spec-type", "draft-simple",
                                    *slots, "-td", "2", "-c", "4096", "--no-webui"],
    }


def rotated_prompts(prompts, start, work):
    """The prompts file from its line `start` on, wrapping round: each turn of --alternate its own prompts."""
    lines = prompts.read_text().splitlines()
    start %= len(lines)
    path = work / f"prompts-from-{start}.jsonl"
    path.write_text("\n".join(lines[start:] + lines[:start]) + "\n")
    return path


def measured_load(server, prompts, args):
    cpu, wall = server.cpu_seconds(), time.monotonic()
    result = load(server.url, prompts, args)
    # Cores busy over the load: a server whose kernels match another's but which runs slower with fewer cores
    # busy waits somewhere between its batches.
    result["cores_busy"] = (server.cpu_seconds() - cpu) / (time.monotonic() - wall)
    return result


def load(url, prompts, args):
    done = subprocess.run([sys.executable, HERE / "serve_load.py", "--url", url, "--concurrency", str(args.clients),
                           "--requests", str(args.requests), "--max-tokens", str(args.max_tokens),
                           "--prompts", prompts, "--limit", "8", "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"real_pair_np4: serve_load failed against {url}: {done.stdout[-500:]} {done.stderr[-500:]}")
    return json.loads(done.stdout)["load"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--klspec", default=str(ROOT / "build/klspec"))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--requests", type=int, default=16, help="completions per server and pass")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache/klspec/real-pair-np4")
    parser.add_argument("--no-llama-draft", action="store_true", help="leave out llama-server with the draft")
    parser.add_argument("--servers", help="only the servers whose names contain one of these comma-separated words "
                        "(llama-server without a draft, the reference, always runs)")
    parser.add_argument("--also", metavar="OPTIONS", help="each chosen klspec server again with these options added, "
                        "an A/B in the same run (e.g. \"--poll 50\")")
    parser.add_argument("--llama-also", metavar="OPTIONS", help="llama-server without a draft again with these "
                        "options added (e.g. \"-fa on -ctv bf16\", klspec's exact V cache): what they cost it")
    parser.add_argument("--baseline-klspec", type=Path, metavar="BINARY", help="each chosen klspec server again "
                        "with this klspec binary (say the build before a change): an A/B of two builds in one run")
    parser.add_argument("--clients", type=int, default=4, help="streaming clients at once (the servers keep 4 slots)")
    parser.add_argument("--draft", type=Path, help="another draft GGUF for every server that loads one (e.g. the "
                        "Q4_0 draft of bench/model_pairs/real_pair_drafts.sh); default: the shipped 0.5B")
    parser.add_argument("--alternate", action="store_true", help="start every server at once and let them take "
                        "turns of --requests each, --passes turns (see above)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    if args.draft and not args.draft.is_file():
        sys.exit(f"real_pair_np4: --draft {args.draft}: no such file")
    args.work.mkdir(parents=True, exist_ok=True)
    target = fetch_real_model("qwen2.5-coder-1.5b")
    draft = args.draft or fetch_real_model("qwen2.5-coder-0.5b")
    prompts = rendered_prompts(args.klspec, target, args.work)
    commands = servers(args.klspec, llama_server_binary(), target, draft)
    if args.no_llama_draft:
        del commands["llama-server, draft γ 3"]
    if args.servers:
        words = args.servers.split(",")
        commands = {name: command for name, command in commands.items()
                    if name == "llama-server, no draft" or any(word in name for word in words)}
    if args.baseline_klspec:
        if not args.baseline_klspec.is_file():
            sys.exit(f"real_pair_np4: --baseline-klspec {args.baseline_klspec}: no such file")
        commands.update({f"{name} ({args.baseline_klspec.name})": [args.baseline_klspec, *command[1:]]
                         for name, command in list(commands.items()) if name.startswith("klspec")})
    if args.also:
        commands.update({f"{name}, {args.also}": [*command, *args.also.split()]
                         for name, command in list(commands.items()) if name.startswith("klspec")})
    if args.llama_also:
        reference = commands["llama-server, no draft"]
        commands[f"llama-server, no draft, {args.llama_also}"] = [*reference, *args.llama_also.split()]
    results = {name: [] for name in commands}
    with contextlib.ExitStack() as running:
        started = ({name: running.enter_context(Server(command, name, timeout=300)) for name, command in commands.items()}
                   if args.alternate else {})
        for p in range(args.passes):
            turn_prompts = rotated_prompts(prompts, p * args.requests, args.work) if args.alternate else prompts
            for name in (list(commands) if p % 2 == 0 else list(reversed(commands))):
                if args.alternate:
                    results[name].append(measured_load(started[name], turn_prompts, args))
                else:
                    with Server(commands[name], name, timeout=300) as server:
                        results[name].append(measured_load(server, turn_prompts, args))
                print(f"pass {p}: {name}: {results[name][-1]['tokens_per_second']:.2f} tok/s", file=sys.stderr)
    (args.work / "results.json").write_text(json.dumps({"commands": {k: list(map(str, v)) for k, v in
                                                                     commands.items()}, "results": results}))
    if args.json:
        print(json.dumps(results))
        return
    reference = results["llama-server, no draft"]
    print("\n".join(cpu_header()))
    turns = f"turns (--alternate) of {args.requests}" if args.alternate else f"passes of {args.requests}"
    print(f"\n{args.clients} clients, draft {Path(draft).name}, {args.passes} {turns} requests of {args.max_tokens} "
          "tokens per server, greedy\n")
    print("| server | tok/s per pass | × llama-server no draft | mean × | latency p50 s | first chunk p50 s | "
          "cores busy | drafted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        rates = " / ".join(f"{r['tokens_per_second']:.2f}" for r in runs)
        each = [r["tokens_per_second"] / ref["tokens_per_second"] for r, ref in zip(runs, reference)]
        ratios = " / ".join(f"{ratio:.2f}" for ratio in each)
        mean = sum(each) / len(each)
        latency = " / ".join(f"{r['latency_p50']:.2f}" for r in runs)
        first = " / ".join(f"{r['first_chunk_p50']:.2f}" for r in runs)
        busy = " / ".join(f"{r['cores_busy']:.2f}" for r in runs)
        print(f"| {name} | {rates} | {ratios} | {mean:.2f} | {latency} | {first} | {busy} | {sum(r['drafted'] for r in runs)} |")


if __name__ == "__main__":
    main()
