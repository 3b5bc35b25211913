#!/usr/bin/env python3
"""The table of bench/serving/serve_grown_compare.sh: generated tokens/s of klspec serve (its defaults) and of
llama-server at each γ, per pass and number of clients, and klspec against llama-server's best γ (issue 47's
goal: ≥ 0.95×), pooled over the passes. klspec was measured once beside each γ; its figure for a pass is the
mean of those runs.

  python3 bench/serving/serve_compare_table.py ~/.cache/klspec/serve-grown3
"""
import json
import re
import statistics
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    runs = {}  # (clients, pass) -> {"klspec": [tok/s], γ: tok/s}
    for f in sorted(out.glob("g*-c*-p*.json")):
        m = re.fullmatch(r"g(\d+)-c(\d+)-p(\d+)\.json", f.name)
        if not m:
            continue
        gamma, clients, pass_ = map(int, m.groups())
        d = json.loads(f.read_text())
        cell = runs.setdefault((clients, pass_), {"klspec": []})
        cell["klspec"].append(d["load"]["tokens_per_second"])
        cell[gamma] = d["llama_server"]["tokens_per_second"]
    if not runs:
        sys.exit(f"serve_compare_table: no g*-c*-p*.json under {out}")
    cpu = (out / "lscpu.txt").read_text() if (out / "lscpu.txt").exists() else ""
    model = re.search(r"Model name:\s*(.+)", cpu)
    caches = re.findall(r"(L[23] cache:\s*.+)", cpu)
    print(f"CPU: {model.group(1) if model else 'unknown'}; " + "; ".join(re.sub(r"\s+", " ", c) for c in caches))
    gammas = sorted({g for cell in runs.values() for g in cell if g != "klspec"})
    print("\n| clients | pass | klspec (defaults) | " + " | ".join(f"llama-server γ {g}" for g in gammas) +
          " | klspec ÷ llama-server's best |")
    print("|---:|---:|---:|" + "---:|" * (len(gammas) + 1))
    for (clients, pass_), cell in sorted(runs.items()):
        ours = statistics.mean(cell["klspec"])
        best = max(cell.get(g, 0.0) for g in gammas)
        print(f"| {clients} | {pass_} | {ours:.1f} | " + " | ".join(f"{cell[g]:.1f}" if g in cell else "—" for g in gammas) +
              f" | {ours / best:.2f}× |")
    print()
    for clients in sorted({c for c, _ in runs}):
        cells = [cell for (c, _), cell in runs.items() if c == clients]
        ours = statistics.mean(x for cell in cells for x in cell["klspec"])
        by_gamma = {g: statistics.mean(cell[g] for cell in cells if g in cell) for g in gammas
                    if any(g in cell for cell in cells)}
        best = max(by_gamma, key=by_gamma.get)
        print(f"{clients} client(s), pooled: klspec {ours:.1f} tok/s, llama-server's best γ {best} {by_gamma[best]:.1f} "
              f"tok/s: {ours / by_gamma[best]:.2f}× (goal ≥ 0.95×)")


if __name__ == "__main__":
    main()
