#!/usr/bin/env python3
"""A winners CSV (the harness CSV that run_search.sh writes, one row per
problem) as a configuration list for run_configs.sh: name|family|layout|shape|params,
the knob values read back from each winner's display name.
  bench/scripts/winners_list.py WINNERS.csv SEEDS_DIR"""
import csv
import json
import os
import re
import sys


def main():
    winners, seeds = sys.argv[1], sys.argv[2]
    for r in csv.DictReader(open(winners)):
        name = r["kernel"]
        family = next(f for f in os.listdir(seeds) if name.startswith(f + "_"))
        meta = json.load(open(os.path.join(seeds, family, "seed.json")))
        knobs = sorted((k[len("ANVIL_"):].lower() for k in meta["knobs"]), key=len, reverse=True)
        rest = name[len(family) + 1:]
        params = [f"{k.upper()}={v}" for k, v in re.findall(r"(%s)(\d+)" % "|".join(knobs), rest)]
        print("|".join([name, family, r["layout"], f"{r['m']}x{r['n']}x{r['k']}", " ".join(params)]))


if __name__ == "__main__":
    main()
