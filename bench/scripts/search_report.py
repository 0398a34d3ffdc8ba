#!/usr/bin/env python3
"""Per-problem summary of a search store: candidates measured, verdicts, wall
time spent measuring, and the verified winner's device and warm speedups over
the best baseline (cuBLAS, cuBLASLt heuristic, cuBLASLt autotuned), with its
efficiency against speed-of-light. Reads the SQLite store directly (read-only).
A store holds every GPU model it was searched on: --gpu names one (as the
store's problems name it, e.g. H100-80GB-HBM3); without it, each GPU's problems
are listed and the geomean spans them all.
  bench/scripts/search_report.py STORE.db [--gpu NAME] [--markdown]"""
import math
import sqlite3
import sys


def main():
    db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
    gpu = sys.argv[sys.argv.index("--gpu") + 1] if "--gpu" in sys.argv else None
    rows = db.execute("""
        SELECT p.id, p.gpu, p.m, p.n, p.k, p.layout, COUNT(DISTINCT m.candidate_id),
               SUM(m.verdict = 'passed'), SUM(m.verdict != 'passed'), SUM(m.seconds)
        FROM problems p JOIN measurements m ON m.problem_id = p.id
        WHERE :gpu IS NULL OR p.gpu = :gpu
        GROUP BY p.id ORDER BY p.gpu, p.m * p.n * p.k""", {"gpu": gpu}).fetchall()
    print("| gpu | shape | layout | candidates | passed | failed | measuring s | winner device us | best baseline us | device speedup | warm speedup | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    logs_d, logs_w = [], []
    for pid, gpu_name, m, n, k, layout, cands, ok, bad, secs in rows:
        best = db.execute("""
            SELECT m.id, m.device_median_us, m.warm_median_us, m.efficiency FROM measurements m
            WHERE m.problem_id = ? AND m.verdict = 'passed' AND m.verified = 1
            ORDER BY m.device_median_us LIMIT 1""", (pid,)).fetchone()
        if best is None:
            print("| %s | %dx%dx%d | %s | %d | %d | %d | %.0f | none verified | | | | |" %
                  (gpu_name, m, n, k, layout, cands, ok, bad, secs))
            continue
        mid, dev, warm, eff = best
        base = db.execute("""SELECT MIN(device_median_us), MIN(warm_median_us) FROM baselines
                             WHERE measurement_id = ? AND device_median_us > 0""", (mid,)).fetchone()
        sd, sw = base[0] / dev, base[1] / warm
        logs_d.append(math.log(sd))
        logs_w.append(math.log(sw))
        print("| %s | %dx%dx%d | %s | %d | %d | %d | %.0f | %.2f | %.2f | %.3f | %.3f | %.2f |" %
              (gpu_name, m, n, k, layout, cands, ok, bad, secs, dev, base[0], sd, sw, eff))
    if logs_d:
        print("\ngeomean speedup over the best baseline: device %.3f, warm %.3f (%d problems)" %
              (math.exp(sum(logs_d) / len(logs_d)), math.exp(sum(logs_w) / len(logs_w)), len(logs_d)))


if __name__ == "__main__":
    main()
