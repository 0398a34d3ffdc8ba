#!/usr/bin/env python3
"""Compares a job run through `anvil serve` with a local `anvil optimize` run
(bench/scripts/run_serve.sh): each problem's verified winner by the figure
(default graph-cold: the median speedup over the best baseline across its
verified runs, from `anvil --json kernels --job JOB`), the geomeans, and the
coordinator's overhead per candidate as each job measured it (its
"coordinator overhead" progress line), with the server's Prometheus counters.
  bench/scripts/serve_compare.py SERVED_KERNELS.json LOCAL_KERNELS.json SERVED_LOG LOCAL_LOG [METRICS_TXT]"""
import json
import math
import re
import sys

FIGURE = "graph-cold"
OVERHEAD = re.compile(r"coordinator overhead: ([\d.]+) ms per candidate \((\d+) candidates; of ([\d.]+) s wall, "
                      r"([\d.]+) s waiting on the evaluator, ([\d.]+) s in the proposers")


def winners(path):
    """(shape, layout) -> (speedup median, min, max, runs) by FIGURE."""
    out = {}
    try:
        data = json.load(open(path))
    except (OSError, ValueError):
        return out
    for k in data.get("kernels", []):
        p = k.get("measurement", {}).get("problem", {})
        s = p.get("shape", {})
        key = (f"{int(s.get('m', 0))}x{int(s.get('n', 0))}x{int(s.get('k', 0))}",
               p.get("layout", "").replace("LAYOUT_", "").lower())
        for sp in k.get("spreads", []):
            if sp.get("figure") == FIGURE:
                out[key] = (sp.get("median", 0), sp.get("min", 0), sp.get("max", 0), sp.get("runs", 0))
    return out


def overhead(path):
    found = None
    for line in open(path, errors="replace"):
        m = OVERHEAD.search(line)
        if m:
            found = tuple(float(x) for x in m.groups())
    return found


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else 0


def metrics(path):
    out = {}
    for line in open(path, errors="replace"):
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith(("anvil_coordinator_", "anvil_evaluator_wait")):
            out[parts[0]] = float(parts[1])
    return out


def main():
    served, local = winners(sys.argv[1]), winners(sys.argv[2])
    print(f"verified winners, {FIGURE} speedup over the best baseline (median of the verified runs [min, max])")
    print(f"{'problem':<20} {'layout':<6} {'served':>24}   {'local':>24}   served/local")
    cell = lambda r: f"{r[0]:.3f}x [{r[1]:.3f}, {r[2]:.3f}]" if r else "-"
    for key in sorted(set(served) | set(local), key=lambda k: (k[1], k[0])):
        s, l = served.get(key), local.get(key)
        ratio = f"{s[0] / l[0]:.3f}" if s and l and l[0] > 0 else "-"
        print(f"{key[0]:<20} {key[1]:<6} {cell(s):>24}   {cell(l):>24}   {ratio}")
    gs, gl = geomean([r[0] for r in served.values()]), geomean([r[0] for r in local.values()])
    print(f"geomean: served {gs:.3f}x over {len(served)} problems, local {gl:.3f}x over {len(local)}"
          + (f" (served/local {gs / gl:.3f})" if gl > 0 else ""))
    for name, path in (("served", sys.argv[3]), ("local", sys.argv[4])):
        o = overhead(path)
        if o:
            print(f"coordinator overhead, {name}: {o[0]:.2f} ms per candidate ({int(o[1])} candidates; "
                  f"{o[2]:.0f} s wall, {o[3]:.0f} s waiting on the evaluator, {o[4]:.1f} s in the proposers)")
        else:
            print(f"coordinator overhead, {name}: no line in {path} (the job did not end?)")
    if len(sys.argv) > 5:
        m = metrics(sys.argv[5])
        n = m.get("anvil_coordinator_candidates_total", 0)
        if n > 0:
            print(f"server counters: {1000 * m.get('anvil_coordinator_overhead_seconds_total', 0) / n:.2f} ms "
                  f"overhead per candidate over {int(n)} candidates, "
                  f"{m.get('anvil_evaluator_wait_seconds_total', 0):.0f} s waiting on the evaluator")


if __name__ == "__main__":
    main()
