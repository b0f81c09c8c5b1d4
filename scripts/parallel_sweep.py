#!/usr/bin/env python3
"""Slack sweep of the parallel engine against the exact engine (docs/parallel-engine.md).

Usage: parallel_sweep.py CACHESCOPE TRACE... [--slacks 1,10,...] [--threads K] [--reps N]
Prints one Markdown row per (trace, slack): wall time (best of N), accesses/s, and the
deviation of the counters from `--engine exact` on the same trace.
"""
import json, subprocess, sys, time

def run(cs, trace, args, reps):
    best, out = None, None
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run([cs, "simulate", trace, "--json", "-"] + args, check=True,
                             capture_output=True).stdout
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return json.loads(out), best

def leaves(v, path=""):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("machine", "engine", "slack", "miss_rate", "level", "path", "threads" if path == "" else "_"):
                continue
            yield from leaves(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, f"{path}[{i}]")
    elif isinstance(v, int) and not isinstance(v, bool):
        yield path, v

def rel(a, b):
    return 0.0 if a == b else abs(a - b) / max(abs(a), 1)

def main():
    argv = sys.argv[1:]
    slacks, threads, reps = [1, 10, 100, 1000, 10000, 100000], 2, 3
    if "--slacks" in argv:
        i = argv.index("--slacks"); slacks = [int(x) for x in argv[i + 1].split(",")]; del argv[i:i + 2]
    if "--threads" in argv:
        i = argv.index("--threads"); threads = int(argv[i + 1]); del argv[i:i + 2]
    if "--reps" in argv:
        i = argv.index("--reps"); reps = int(argv[i + 1]); del argv[i:i + 2]
    cs, traces = argv[0], argv[1:]
    print("| trace | slack | time s | M acc/s | L1 misses Δ% | coherence misses Δ% | L2 misses Δ% | max counter Δ% | counters ≠ |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for tr in traces:
        ex, tex = run(cs, tr, ["--engine", "exact"], reps)
        acc = sum(t["accesses"] for t in ex["threads"])
        l1 = lambda r: r["levels"][0]["misses"]
        coh = lambda r: l1(r)["coherence_true"] + l1(r)["coherence_false"]
        tot = lambda m: sum(m.values())
        lex = dict(leaves(ex))
        name = tr.rsplit("/", 1)[-1]
        print(f"| {name} | exact | {tex:.3f} | {acc / tex / 1e6:.2f} | | | | | |")
        for s in slacks:
            pa, tpa = run(cs, tr, ["--engine", "parallel", "--slack", str(s), "--threads", str(threads)], reps)
            lpa = dict(leaves(pa))
            diffs = [rel(lex[k], lpa.get(k, 0)) for k in lex]
            ndiff = sum(1 for d in diffs if d > 0)
            l2 = (lambda r: tot(r["levels"][1]["misses"])) if len(ex["levels"]) > 1 else (lambda r: 0)
            cohd = "-" if coh(ex) == 0 and coh(pa) == 0 else f"{100 * rel(coh(ex), coh(pa)):.2f}"
            print(f"| {name} | {s} | {tpa:.3f} | {acc / tpa / 1e6:.2f} | {100 * rel(tot(l1(ex)), tot(l1(pa))):.3f} | {cohd} | {100 * rel(l2(ex), l2(pa)):.3f} | {100 * max(diffs):.2f} | {ndiff}/{len(diffs)} |")

main()
