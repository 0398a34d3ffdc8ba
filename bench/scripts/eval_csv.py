#!/usr/bin/env python3
"""Turns `anvil --json eval` or `anvil --json kernels` lines (one Kernel per
problem; `eval_csv.py -` names each row by its candidate) into the harness
CSV: kernel,m,n,k,layout,correct,rel_err,device_us,cold_us,warm_us,call_us,
first_call_us,cublas_device_us,cublas_warm_us,lt_heur_device_us,lt_heur_warm_us,
lt_auto_device_us,lt_auto_warm_us,sol_us  (plus verdict, reason, seconds)."""
import json
import sys

COLS = ("kernel,m,n,k,layout,correct,rel_err,device_us,cold_us,warm_us,call_us,first_call_us,"
        "cublas_device_us,cublas_warm_us,lt_heur_device_us,lt_heur_warm_us,lt_auto_device_us,"
        "lt_auto_warm_us,sol_us,verdict,reason,seconds")


def med(t, fig):
    return t.get(fig, {}).get("median_us", 0.0)


def row(kernel, rec):
    m = rec.get("measurement", {})
    p = m.get("problem", {})
    s = p.get("shape", {})
    t = m.get("timings", {})
    base = {b["name"]: b.get("timings", {}) for b in m.get("baselines", [])}
    out = [kernel, s.get("m", 0), s.get("n", 0), s.get("k", 0),
           {"LAYOUT_NT": "nt", "LAYOUT_NN": "nn"}.get(p.get("layout"), "?"),
           int(m.get("verdict") == "VERDICT_PASSED"), "%.3e" % m.get("rel_err", 0.0)]
    out += ["%.3f" % med(t, f) for f in ("device", "cold", "warm", "call")]
    out.append("%.3f" % t.get("first_call_us", 0.0))
    for name in ("cublas", "cublaslt_heuristic", "cublaslt_auto"):
        bt = base.get(name, {})
        out += ["%.3f" % med(bt, "device"), "%.3f" % med(bt, "warm")]
    out += ["%.3f" % m.get("sol_us", 0.0), m.get("verdict", ""), m.get("reason", ""),
            "%.2f" % m.get("seconds", 0.0)]
    return ",".join(str(x) for x in out)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--header":
        print(COLS)
        return
    kernel = sys.argv[1]  # "-": the candidate's own name (anvil --json kernels)
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("{") and '"measurement"' in line:
            doc = json.loads(line)
            for rec in doc.get("kernels", [doc]):  # kernels: {"kernels": [Kernel...]}
                name = rec.get("candidate", {}).get("name", "?") if kernel == "-" else kernel
                print(row(name, rec))


if __name__ == "__main__":
    main()
