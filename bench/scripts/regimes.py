#!/usr/bin/env python3
"""Reads `anvil --json kernels` (one Kernel per problem, with the spreads of its
verified runs) and writes either the regimes table (markdown: per problem the
winner's speedup over the best baseline in graph-cold, graph-hot and device,
each as median [min-max] over its verified runs, and whether the winner's rank
between regimes differs from its device figure's) or, with --plan, the
anvil-crosscheck plan CSV (m,n,k,layout,library,runner_graph_cold,runner_graph_hot).
  anvil --json kernels --job JOB | regimes.py [--plan]"""
import json
import sys

FIGURES = ("graph-cold", "graph-hot", "device")


def spreads(kernel):
    return {s["figure"]: s for s in kernel.get("spreads", [])}


def shape(kernel):
    p = kernel["measurement"]["problem"]
    s = p["shape"]
    layout = {"LAYOUT_NT": "nt", "LAYOUT_NN": "nn"}.get(p.get("layout"), "?")
    return int(s.get("m", 0)), int(s.get("n", 0)), int(s.get("k", 0)), layout


def cell(s):
    if not s:
        return "-"
    return "%.3fx [%.3f-%.3f] n=%d" % (s["median"], s["min"], s["max"], s["runs"])


def main():
    doc = json.load(sys.stdin)
    kernels = doc.get("kernels", [])
    if "--plan" in sys.argv[1:]:
        print("m,n,k,layout,library,runner_graph_cold,runner_graph_hot")
        for k in kernels:
            sp = spreads(k)
            lib = k.get("build", {}).get("artifact", "")
            if not lib:
                continue
            m, n, kk, layout = shape(k)
            cold = sp.get("graph-cold", {}).get("median", 0.0)
            hot = sp.get("graph-hot", {}).get("median", 0.0)
            print("%d,%d,%d,%s,%s,%.4f,%.4f" % (m, n, kk, layout, lib, cold, hot))
        return
    print("| problem | kernel | graph-cold | graph-hot | device | ahead of vendor in |")
    print("|---|---|---|---|---|---|")
    for k in kernels:
        sp = spreads(k)
        m, n, kk, layout = shape(k)
        ahead = [f for f in FIGURES if sp.get(f, {}).get("median", 0) > 1.0]
        print("| %dx%dx%d %s | %s | %s | %s | %s | %s |" % (
            m, n, kk, layout, k["candidate"]["name"], cell(sp.get("graph-cold")),
            cell(sp.get("graph-hot")), cell(sp.get("device")), ", ".join(ahead) or "none"))


if __name__ == "__main__":
    main()
