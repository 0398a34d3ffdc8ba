"""Checks and times an exported package's Python module inside captured CUDA
graphs: for every kernel shape of the manifest, anvil_hgemm.linear (nt) or
.matmul (nn) is captured in torch.cuda.graph, replayed, checked against torch
and timed against torch's own call captured the same way.
    python3 bench/scripts/export_torch.py PKG_DIR LIB OUT_CSV
Prints a table; exits 0 with a message when torch is not installed."""
import csv
import os
import sys

try:
    import torch
except ImportError:
    print("torch is not installed here: the Python module's graph check is skipped")
    sys.exit(0)

pkg, lib, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["ANVIL_HGEMM_LIBRARY"] = lib
sys.path.insert(0, os.path.join(pkg, "python"))
import anvil_hgemm  # noqa: E402

print("status:", anvil_hgemm.status())


def replay_us(fn, calls=50, rounds=7):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()  # warm-up outside the capture, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            y = fn()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / calls)
    return sorted(times)[len(times) // 2], y


rows = []
for r in csv.DictReader(open(os.path.join(pkg, "manifest.csv"))):
    if r["path"] != "kernel":
        continue
    m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    if r["layout"] == "nt":
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        ours = lambda: anvil_hgemm.linear(a, w)  # noqa: E731
        theirs = lambda: torch.nn.functional.linear(a, w)  # noqa: E731
    else:
        w = torch.randn(k, n, device="cuda", dtype=torch.float16)
        ours = lambda: anvil_hgemm.matmul(a, w)  # noqa: E731
        theirs = lambda: torch.matmul(a, w)  # noqa: E731
    t_ours, y = replay_us(ours)
    t_torch, ref = replay_us(theirs)
    err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    routed = anvil_hgemm.dispatch(r["layout"], m, n, k)
    rows.append([m, n, k, r["layout"], routed, f"{t_ours:.3f}", f"{t_torch:.3f}",
                 f"{t_torch / t_ours:.4f}", f"{err:.2e}", "ok" if err < 5e-3 else "WRONG"])
    print(*rows[-1])
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["m", "n", "k", "layout", "dispatch", "module_graph_us", "torch_graph_us",
                "ratio", "rel_err", "check"])
    w.writerows(rows)
sys.exit(0 if all(r[-1] == "ok" for r in rows) else 1)
