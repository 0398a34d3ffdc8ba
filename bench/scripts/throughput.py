#!/usr/bin/env python3
"""Measurement throughput of one job, read from its store.

    throughput.py STORE.db [--job ID] [--curve curve.csv] [--util util.csv]

Prints, for the job (default: the newest):
  measurements per minute (screens: fidelity 'screen'; stores from before
  fidelities count every measurement as full), full measurements per minute,
  builds per minute (fresh nvcc builds made while the job ran, cache hits
  apart), the GPU busy fraction (the runners' wall time the job was charged,
  over the job's wall time), seconds until each problem's first measurement,
  and, with --curve (anvil optimize --curve), the geomean of every problem's
  best-so-far speedup at 2, 5, 10, 13 and 15 minutes, and the runners' own
  account of where the items' time went (steps, process start-up); the GPU's
  timeline after the job's first minute, by the runners' clocks (each item
  from its start, process start-up included, to its end: the share of time
  some item was on the GPU, and the gaps between items); with --util
  (nvidia-smi utilization.gpu samples, one per second) the mean reported
  utilization.
"""
import argparse
import csv
import json
import math
import sqlite3
import statistics
import sys


def columns(db, table):
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def geomeans(path, problems):
    """The geomean of every problem's best-so-far speedup at 2, 5, 10, 13
    and 15 minutes, from anvil optimize --curve."""
    best = {}
    points = []
    with open(path) as f:
        for r in csv.DictReader(f):
            col = next(k for k in r if k.startswith("best_speedup_"))
            points.append((float(r["seconds"]), r["problem"], float(r[col])))
    points.sort()
    for minute in (2, 5, 10, 13, 15):
        for t, p, s in points:
            if t <= minute * 60:
                best[p] = max(best.get(p, 0), s)
        if points and points[-1][0] + 1 < (minute - 1) * 60:
            break
        have = [s for s in best.values() if s > 0]
        if have:
            g = math.exp(sum(math.log(s) for s in have) / len(have))
            print(f"geomean of best so far at {minute} min: {g:.3f}x "
                  f"({len(have)} problems with a passing candidate, of {problems} measured)")


def phases(db, job, created, budget):
    """Where the items' runner time went within the budget: the runners'
    own accounting ("runner_s.<step>" in each measurement's profile)."""
    rows = db.execute(
        "SELECT seconds, profile FROM measurements WHERE job_id = ? AND measured_at <= ?",
        (job, created + budget * 1e3)).fetchall()
    sums, items, seen = {}, 0, 0
    for secs, profile in rows:
        p = json.loads(profile or "{}")
        steps = {k[len("runner_s."):]: v for k, v in p.items() if k.startswith("runner_s.")}
        items += secs or 0
        if steps:
            seen += 1
        for k, v in steps.items():
            sums[k] = sums.get(k, 0) + v
    if not seen:
        return
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in sorted(sums.items(), key=lambda kv: -kv[1]))
    print(f"the runners' time within the budget ({seen} items): items {items:.0f} s "
          f"({items / max(seen, 1) * 1e3:.0f} ms each); {parts}")


def timeline(db, job, created, skip_s=60.0):
    """The share of time from skip_s after the job's start to its last item
    in which some item was on the GPU, and the gaps between items."""
    rows = db.execute("SELECT measured_at, seconds, profile FROM measurements WHERE job_id = ?",
                      (job,)).fetchall()
    spans = []
    for at, secs, profile in rows:
        end = (at - created) / 1e3
        start = end - (secs or 0) - json.loads(profile or "{}").get("runner_s.process", 0)
        if end > skip_s:
            spans.append((max(start, skip_s), end))
    if not spans:
        return
    spans.sort()
    covered, gaps, cur = 0.0, [], skip_s
    for a, b in spans:
        if a > cur:
            gaps.append(a - cur)
        covered += max(0.0, b - max(a, cur))
        cur = max(cur, b)
    span = cur - skip_s
    big = [g for g in gaps if g > 0.5]
    print(f"GPU timeline from {skip_s:.0f} s to the last item ({span:.0f} s), by the runners' clocks: "
          f"an item on the GPU {covered / max(span, 1e-9):.1%} of it; gaps {sum(gaps):.1f} s "
          f"({len(big)} over 0.5 s: {sum(big):.1f} s; {len(gaps) - len(big)} shorter: "
          f"{sum(gaps) - sum(big):.1f} s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--job")
    ap.add_argument("--curve")
    ap.add_argument("--util")
    a = ap.parse_args()
    db = sqlite3.connect(a.store)
    job = a.job or db.execute("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").fetchone()[0]
    created, updated, wall, gpu = db.execute(
        "SELECT created_at, updated_at, wall_seconds, gpu_seconds FROM jobs WHERE id = ?", (job,)).fetchone()
    has_fidelity = "fidelity" in columns(db, "measurements")
    fid = "fidelity" if has_fidelity else "'full'"
    rows = db.execute(
        f"SELECT problem_id, measured_at, seconds, verified, {fid} FROM measurements WHERE job_id = ?",
        (job,)).fetchall()
    if not rows:
        sys.exit(f"job {job} has no measurements")
    first_at = min(r[1] for r in rows)
    last_at = max(r[1] for r in rows)
    minutes = max(wall, 1e-9) / 60
    screens = sum(1 for r in rows if r[4] == "screen")
    full = len(rows) - screens
    builds = db.execute(
        "SELECT COUNT(*), SUM(cache_hit), SUM(seconds) FROM builds WHERE created_at BETWEEN ? AND ?",
        (created, updated)).fetchone()
    fresh = (builds[0] or 0) - (builds[1] or 0)
    firsts = db.execute(
        "SELECT problem_id, MIN(measured_at) FROM measurements WHERE job_id = ? GROUP BY problem_id",
        (job,)).fetchall()
    to_first = sorted((t - created) / 1e3 for _, t in firsts)
    print(f"job: {job}  wall {wall:.0f} s, runners {gpu:.0f} s, {len(firsts)} problems measured")
    print(f"measurements per minute: {screens / minutes:.1f}")
    print(f"full measurements per minute: {full / minutes:.1f}")
    print(f"builds per minute: {fresh / minutes:.1f}")
    print(f"measurements: {len(rows)} ({screens} screens, {full} full, "
          f"{sum(1 for r in rows if r[3])} verified); fresh builds {fresh} "
          f"(cache hits {builds[1] or 0}), nvcc {builds[2] or 0:.0f} s in all")
    print(f"GPU busy (runner wall time / job wall time): {gpu / max(wall, 1e-9):.1%}")
    print(f"first measurement after job start, s: first problem {to_first[0]:.1f}, "
          f"median {statistics.median(to_first):.1f}, last {to_first[-1]:.1f}")
    print(f"first to last measurement: {(last_at - first_at) / 1e3:.0f} s")
    # The search itself: until the budget ran out (verification runs after it).
    request = json.loads(db.execute("SELECT request FROM jobs WHERE id = ?", (job,)).fetchone()[0])
    budget = float((request.get("budget") or {}).get("max_wall_seconds")
                   or (request.get("budget") or {}).get("maxWallSeconds") or 0)
    if budget > 0:
        inside = [r for r in rows if (r[1] - created) / 1e3 <= budget]
        s_in = sum(1 for r in inside if r[4] == "screen")
        b_in = db.execute("SELECT COUNT(*) FROM builds WHERE cache_hit = 0 AND created_at BETWEEN ? AND ?",
                          (created, created + budget * 1e3)).fetchone()[0]
        busy = sum(r[2] for r in inside)
        print(f"within the {budget:.0f} s budget: {s_in / budget * 60:.1f} screens/min, "
              f"{(len(inside) - s_in) / budget * 60:.1f} full/min, {b_in / budget * 60:.1f} builds/min, "
              f"the items' own runner time {busy / budget:.1%} of it")
        phases(db, job, created, budget)
    timeline(db, job, created)
    if a.util:
        with open(a.util) as f:
            vals = [float(r[0].split()[0]) for r in csv.reader(f) if r and r[0].strip()[0].isdigit()]
        if vals:
            print(f"nvidia-smi utilization.gpu: mean {statistics.mean(vals):.1f}% over {len(vals)} samples")
    if a.curve:
        geomeans(a.curve, len(firsts))

if __name__ == "__main__":
    main()
