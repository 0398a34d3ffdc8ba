#!/usr/bin/env python3
"""Shape-specialised configurations against their general twins in a search
store: for every passed measurement of a candidate whose shape knobs
(SHAPE_M/N/K) are set, the general candidate of the same family source with the
same other knobs measured on the same problem (first passed measurement each, so
neither is a re-check). Speedups are against the baselines timed in each one's
own process; "gain" is their ratio (specialised over general). Read-only.
  bench/scripts/specialise_report.py STORE.db [--job JOB]"""
import json
import math
import sqlite3
import sys

SHAPE = ("SHAPE_M", "SHAPE_N", "SHAPE_K")


def main():
    db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
    job = sys.argv[sys.argv.index("--job") + 1] if "--job" in sys.argv else None
    rows = db.execute("""
        SELECT m.id, m.problem_id, p.m, p.n, p.k, p.layout, c.id, c.name, c.family, c.source, c.params,
               m.device_median_us, m.warm_median_us
        FROM measurements m JOIN candidates c ON c.id = m.candidate_id JOIN problems p ON p.id = m.problem_id
        WHERE m.verdict = 'passed' AND (?1 IS NULL OR m.job_id = ?1) ORDER BY m.id""", (job,)).fetchall()
    first = {}  # (problem, family, source, general knobs, specialised?) -> row
    for r in rows:
        params = json.loads(r[10])
        spec = any(params.get(k, "0") != "0" for k in SHAPE)
        general = tuple(sorted((k, v) for k, v in params.items() if k not in SHAPE))
        first.setdefault((r[1], r[8], r[9], general, spec), r)

    def speedups(r):
        base = db.execute("""SELECT MIN(device_median_us), MIN(warm_median_us) FROM baselines
                             WHERE measurement_id = ? AND device_median_us > 0""", (r[0],)).fetchone()
        return base[0] / r[11], base[1] / r[12]

    print("| shape | layout | configuration (general knobs) | general us | specialised us | device speedup general -> specialised | gain | warm gain |")
    print("|---|---|---|---|---|---|---|---|")
    gains = []
    for key, s in sorted(first.items(), key=lambda kv: kv[1][2] * kv[1][3] * kv[1][4]):
        if not key[4]:
            continue
        g = first.get(key[:4] + (False,))
        if g is None:
            continue
        (gd, gw), (sd, sw) = speedups(g), speedups(s)
        gains.append(sd / gd)
        knobs = " ".join("%s=%s" % kv for kv in key[3] if kv[0] in ("BM", "BN", "STAGES", "SPLIT_K", "CLUSTER", "PERSISTENT", "EPILOGUE"))
        print("| %dx%dx%d | %s | %s %s | %.2f | %.2f | %.3f -> %.3f | %.3f | %.3f |" %
              (s[2], s[3], s[4], s[5], s[8], knobs, g[11], s[11], gd, sd, sd / gd, sw / gw))
    if gains:
        print("\n%d pairs; device gain geomean %.3f, median %.3f, range %.3f-%.3f" %
              (len(gains), math.exp(sum(map(math.log, gains)) / len(gains)),
               sorted(gains)[len(gains) // 2], min(gains), max(gains)))


if __name__ == "__main__":
    main()
