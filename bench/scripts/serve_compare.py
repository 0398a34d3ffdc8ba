#!/usr/bin/env python3
"""Compares a job run through `anvil serve` with a local `anvil optimize` run
(bench/scripts/run_serve.sh): each problem's best verified time, baseline and
speedup by the job's figure (the summary table both print), their geomeans,
and the coordinator's overhead per candidate as each job measured it (its
"coordinator overhead" line), with the server's Prometheus counters.
  bench/scripts/serve_compare.py SERVE_LOG LOCAL_LOG [METRICS_TXT]"""
import math
import re
import sys

ROW = re.compile(r"^\s+(\S+)\s+(nt|nn)\s+(\d+) tried\s+([\d.]+) us\s+best baseline\s+([\d.]+) us\s+([\d.]+)x")
OVERHEAD = re.compile(r"coordinator overhead: ([\d.]+) ms per candidate \((\d+) candidates; of ([\d.]+) s wall, "
                      r"([\d.]+) s waiting on the evaluator, ([\d.]+) s in the proposers")


def read(path):
    rows, overhead = {}, None
    for line in open(path, errors="replace"):
        m = ROW.match(line)
        if m:
            rows[(m[1], m[2])] = (int(m[3]), float(m[4]), float(m[5]), float(m[6]))
        m = OVERHEAD.search(line)
        if m:
            overhead = tuple(float(x) for x in m.groups())
    return rows, overhead


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
    served, s_over = read(sys.argv[1])
    local, l_over = read(sys.argv[2])
    print(f"{'problem':<22} {'layout':<6} {'served: tried':>13} {'us':>9} {'speedup':>8}   "
          f"{'local: tried':>12} {'us':>9} {'speedup':>8}   served/local")
    for key in sorted(set(served) | set(local), key=lambda k: (k[1], k[0])):
        s, l = served.get(key), local.get(key)
        cell = lambda r, w: f"{r[0]:>{w}} {r[1]:>9.2f} {r[3]:>7.3f}x" if r else f"{'-':>{w}} {'-':>9} {'-':>8}"
        ratio = f"{s[3] / l[3]:.3f}" if s and l and l[3] > 0 else "-"
        print(f"{key[0]:<22} {key[1]:<6} {cell(s, 13)}   {cell(l, 12)}   {ratio}")
    gs, gl = geomean([r[3] for r in served.values()]), geomean([r[3] for r in local.values()])
    print(f"geomean speedup: served {gs:.3f}x over {len(served)} problems, local {gl:.3f}x over {len(local)}"
          + (f" (served/local {gs / gl:.3f})" if gl > 0 else ""))
    for name, o in (("served", s_over), ("local", l_over)):
        if o:
            print(f"coordinator overhead, {name}: {o[0]:.2f} ms per candidate ({int(o[1])} candidates; "
                  f"{o[2]:.0f} s wall, {o[3]:.0f} s waiting on the evaluator, {o[4]:.1f} s in the proposers)")
        else:
            print(f"coordinator overhead, {name}: not reported (the job did not end)")
    if len(sys.argv) > 3:
        m = metrics(sys.argv[3])
        n = m.get("anvil_coordinator_candidates_total", 0)
        if n > 0:
            print(f"server metrics: {1000 * m.get('anvil_coordinator_overhead_seconds_total', 0) / n:.2f} ms "
                  f"overhead per candidate over {int(n)} candidates, "
                  f"{m.get('anvil_evaluator_wait_seconds_total', 0):.0f} s waiting on the evaluator")


if __name__ == "__main__":
    main()
