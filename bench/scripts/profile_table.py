#!/usr/bin/env python3
"""The counter profiles in `anvil --json eval --profile` lines (one Kernel per
problem) as one table per problem: each metric for the candidate and for the
fastest baseline, and their ratio; then whatever the profile could not give.
The derived row `kernel_us` is the busiest SM's active cycles at the range's
clock: the kernels' time (the range itself also holds profiler set-up).
  anvil --json eval ... --profile | bench/scripts/profile_table.py NAME"""
import json
import sys


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "candidate"
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("{"):
            continue
        m = json.loads(line).get("measurement", {})
        s = m.get("problem", {}).get("shape", {})
        shape = "%sx%sx%s" % (s.get("m", 0), s.get("n", 0), s.get("k", 0))
        prof = m.get("profile", {})
        bases = m.get("baselines", [])
        bi = int(prof.get("hw.baseline_index", -1))
        base = bases[bi]["name"] if 0 <= bi < len(bases) else "baseline"
        dev = m.get("timings", {}).get("device", {}).get("median_us", 0.0)
        print("\n### %s %s (%s; device %.2f us)\n" % (name, shape, m.get("verdict", ""), dev))
        print("| metric | %s | %s | ratio |" % (name, base))
        print("|---|---|---|---|")
        for prefix in ("hw.", "hw.baseline."):
            cycles = prof.get(prefix + "sm__cycles_active.max")
            elapsed = prof.get(prefix + "gpc__cycles_elapsed.max")
            ns = prof.get(prefix + "gpu__time_duration.sum")
            if cycles and elapsed and ns:
                prof[prefix + "kernel_us"] = cycles / (elapsed / ns) * 1e-3
        for key in sorted(prof):
            if not key.startswith("hw.") or key.startswith("hw.baseline"):
                continue
            metric = key[3:]
            ours = prof[key]
            theirs = prof.get("hw.baseline." + metric)
            ratio = "%.2f" % (ours / theirs) if theirs else "-"
            print("| %s | %.4g | %s | %s |" % (metric, ours, "-" if theirs is None else "%.4g" % theirs, ratio))
        if m.get("profile_error"):
            print("\nprofile: %s" % m["profile_error"])


if __name__ == "__main__":
    main()
