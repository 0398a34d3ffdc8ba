#!/usr/bin/env python3
"""Does a screen rank as the full measurement does?

    screen_vs_full.py STORE.db [--job ID] [--problems N] [--top 5] [--anvil anvil]

For each of N problems of the job (default: the newest job; problems spread
over its list), takes the top candidates by their screen figure (the job's
reward figure, graph-cold by default), measures each again at full fidelity
with `anvil --json eval` (a fresh runner process each, baselines beside it,
the build from the cache), and prints per problem the screen's and the full
measurement's speedups over the best baseline in that figure, the full
order's rank of each, and whether the screen's winner is within 3% of its
full figure. Ends with the totals: winners within 3%, the screen's winner
also the full winner, what taking the screen's winner costs in full figure
against the best of the five (candidates within noise of each other trade
places: this is what the order costs), Spearman's rank correlation (mean
over problems).
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

FIGURE_COLUMN = {"graph-cold": "graph_cold", "graph-hot": "graph_hot", "device": "device",
                 "cold": "cold", "warm": "warm", "call": "call"}


def spearman(a, b):
    n = len(a)
    if n < 2:
        return float("nan")
    ra = {x: i for i, x in enumerate(sorted(range(n), key=lambda i: -a[i]))}
    rb = {x: i for i, x in enumerate(sorted(range(n), key=lambda i: -b[i]))}
    d2 = sum((ra[i] - rb[i]) ** 2 for i in range(n))
    return 1 - 6 * d2 / (n * (n * n - 1))


def full_speedup(anvil, source, params, layout, shape, figure, key):
    with tempfile.NamedTemporaryFile("w", suffix=".cu", delete=False) as f:
        f.write(source)
        path = f.name
    try:
        cmd = [anvil, "--json", "eval", path, "--layout", layout, "--shape", shape]
        for k, v in sorted(params.items()):
            cmd += ["--param", f"{k}={v}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/tmp")
    finally:
        os.unlink(path)
    for line in out.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        m = rec.get("measurement", {})
        if m.get("verdict") != "VERDICT_PASSED":
            return None, m.get("reason", "failed")
        us = m.get("timings", {}).get(key, {}).get("median_us", 0)
        base = [b.get("timings", {}).get(key, {}).get("median_us", 0) for b in m.get("baselines", [])]
        base = [b for b in base if b > 0]
        if us <= 0 or not base:
            return None, "no figure"
        return min(base) / us, ""
    return None, (out.stderr.strip().splitlines() or ["no output"])[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--job")
    ap.add_argument("--problems", type=int, default=10)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--anvil", default="anvil")
    a = ap.parse_args()
    db = sqlite3.connect(a.store)
    job = a.job or db.execute("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").fetchone()[0]
    request = json.loads(db.execute("SELECT request FROM jobs WHERE id = ?", (job,)).fetchone()[0])
    figure = request.get("reward_figure") or request.get("rewardFigure") or "graph-cold"
    col = FIGURE_COLUMN[figure]
    problems = db.execute(
        "SELECT DISTINCT p.id, p.m, p.n, p.k, p.layout FROM measurements m JOIN problems p "
        "ON p.id = m.problem_id WHERE m.job_id = ? AND m.fidelity = 'screen' ORDER BY p.id",
        (job,)).fetchall()
    if not problems:
        sys.exit(f"job {job} has no screens")
    step = max(1, len(problems) // a.problems)
    chosen = problems[::step][:a.problems]
    print(f"job {job}, figure {figure}: top {a.top} screens of {len(chosen)} problems, each "
          f"measured again at full fidelity\n")
    print("| problem | candidate | screen speedup | full speedup | full rank | difference |")
    print("|---|---|---|---|---|---|")
    within, same_winner, rhos, compared, losses = 0, 0, [], 0, []
    for pid, m, n, k, layout in chosen:
        rows = db.execute(
            f"SELECT m.id, m.candidate_id, m.{col}_median_us FROM measurements m "
            f"WHERE m.job_id = ? AND m.problem_id = ? AND m.fidelity = 'screen' "
            f"AND m.verdict = 'passed' AND m.{col}_median_us > 0 ORDER BY m.{col}_median_us",
            (job, pid)).fetchall()
        seen, top = set(), []
        for mid, cid, us in rows:
            if cid in seen:
                continue
            seen.add(cid)
            base = db.execute(f"SELECT MIN({col}_median_us) FROM baselines WHERE measurement_id = ? "
                              f"AND {col}_median_us > 0", (mid,)).fetchone()[0]
            if base:
                top.append((cid, base / us))
            if len(top) == a.top:
                break
        results = []
        for cid, screen in top:
            source, params = db.execute("SELECT source, params FROM candidates WHERE id = ?", (cid,)).fetchone()
            full, why = full_speedup(a.anvil, source, json.loads(params), layout, f"{m}x{n}x{k}", figure, col)
            results.append((cid, screen, full, why))
        ok = [(c, s, f) for c, s, f, _ in results if f]
        order = sorted(range(len(ok)), key=lambda i: -ok[i][2])
        rank = {ok[i][0]: r + 1 for r, i in enumerate(order)}
        for cid, screen, full, why in results:
            diff = f"{(screen / full - 1) * 100:+.1f}%" if full else why
            print(f"| {m}x{n}x{k} {layout} | {cid[:12]} | {screen:.3f}x | "
                  f"{f'{full:.3f}x' if full else '-'} | {rank.get(cid, '-')} | {diff} |")
        if ok:
            compared += 1
            winner = ok[0]
            within += abs(winner[1] / winner[2] - 1) <= 0.03
            same_winner += rank.get(winner[0]) == 1
            losses.append(1 - winner[2] / max(x[2] for x in ok))  # picking by screen, in full figure
            rho = spearman([x[1] for x in ok], [x[2] for x in ok])
            if rho == rho:
                rhos.append(rho)
    print(f"\nproblems compared: {compared}")
    print(f"screen's winner within 3% of its full figure: {within} of {compared}")
    print(f"screen's winner is the full measurement's winner: {same_winner} of {compared}")
    if losses:
        print(f"full figure lost by taking the screen's winner instead of the full measurement's best "
              f"of the {a.top}: mean {sum(losses) / len(losses):.1%}, worst {max(losses):.1%}")
    if rhos:
        print(f"Spearman rank correlation, screen vs full, mean over problems: {sum(rhos) / len(rhos):.2f}")


if __name__ == "__main__":
    main()
