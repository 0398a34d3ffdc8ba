#!/usr/bin/env python3
"""Per configuration and operand-set count, the device ratio against the best
baseline in each process, from run_configs.sh's CSV with OPERAND_SETS (rows
named NAME_sN_pP): how far a figure moves from one process to the next.
  bench/scripts/operand_spread.py configs.csv"""
import collections
import csv
import re
import sys


def main():
    rows = collections.defaultdict(list)
    for r in csv.DictReader(open(sys.argv[1])):
        m = re.match(r"(.*)_s(\d+)_p(\d+)$", r["kernel"])
        if not m:
            continue
        dev = float(r["device_us"])
        best = min(float(r[c]) for c in ("cublas_device_us", "lt_heur_device_us", "lt_auto_device_us"))
        rows[(m.group(1), int(m.group(2)))].append((dev, best, r["verdict"]))
    for (name, sets), xs in rows.items():
        ratios = [b / d for d, b, _ in xs if d > 0]
        print("%-22s sets %d  device us %s  best baseline us %s  ratio %s  spread %.3f  %s" % (
            name, sets, " ".join("%.2f" % d for d, _, _ in xs), " ".join("%.2f" % b for _, b, _ in xs),
            " ".join("%.3f" % x for x in ratios), max(ratios) - min(ratios) if ratios else 0,
            ",".join(sorted(set(s for _, _, s in xs)))))


if __name__ == "__main__":
    main()
