"""anvil_hgemm: Anvil's HGEMM kernels for torch, through ctypes over
libanvil_hgemm.so (no build step).

    import anvil_hgemm
    c = anvil_hgemm.matmul(a, b)   # a [M, K], b [K, N]  -> a @ b       (layout nn)
    y = anvil_hgemm.linear(x, w)   # x [..., K], w [N, K] -> x @ w.T    (layout nt)

Tensors must be fp16, contiguous and on a CUDA device. A shape the package
holds no kernel for (or a machine the table was not measured on) goes to
torch itself, so results never come from a slower path than torch's own.
Calls run on torch's current stream, allocate through torch's caching
allocator and never synchronise, so they can be captured in
torch.cuda.graphs (kernel shapes need no cuBLAS handle at all).

The library is found through $ANVIL_HGEMM_LIBRARY, else beside this file,
in ../, ../lib or ../build.
"""
import ctypes
import os
import threading

import torch

_NT, _NN = 1, 2
_PATH_KERNEL = 1
_lock = threading.Lock()
_lib = None
_routes = {}  # (device, layout, M, N, K) -> True when a kernel serves it


def _library():
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        here = os.path.dirname(os.path.abspath(__file__))
        candidates = [os.environ.get("ANVIL_HGEMM_LIBRARY", "")] + [
            os.path.join(here, d, "libanvil_hgemm.so") for d in (".", "..", "../lib", "../build")]
        for path in candidates:
            if path and os.path.exists(path):
                lib = ctypes.CDLL(path)
                break
        else:
            raise OSError("libanvil_hgemm.so not found (set ANVIL_HGEMM_LIBRARY)")
        lib.anvil_hgemm.restype = ctypes.c_int
        lib.anvil_hgemm.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 4 + [
            ctypes.c_size_t, ctypes.c_void_p]
        lib.anvil_hgemm_workspace_bytes.restype = ctypes.c_size_t
        lib.anvil_hgemm_workspace_bytes.argtypes = [ctypes.c_int] * 4
        lib.anvil_hgemm_dispatch.restype = ctypes.c_int
        lib.anvil_hgemm_dispatch.argtypes = [ctypes.c_int] * 4 + [ctypes.POINTER(ctypes.c_char_p)]
        lib.anvil_hgemm_status_message.restype = ctypes.c_char_p
        lib.anvil_hgemm_status_string.restype = ctypes.c_char_p
        lib.anvil_hgemm_status_string.argtypes = [ctypes.c_int]
        _lib = lib
        return lib


def status():
    """The library's status line for the current device (table in use, or why not)."""
    return _library().anvil_hgemm_status_message().decode()


def dispatch(layout, m, n, k):
    """Where (layout 'nt'|'nn', M, N, K) goes: a kernel name, 'cublaslt' or 'cublas'."""
    name = ctypes.c_char_p()
    _library().anvil_hgemm_dispatch(_NT if layout == "nt" else _NN, m, n, k, ctypes.byref(name))
    return name.value.decode() if name.value else "?"


def _served(layout, m, n, k, device):
    key = (device, layout, m, n, k)
    hit = _routes.get(key)
    if hit is None:
        with torch.cuda.device(device):
            hit = _library().anvil_hgemm_dispatch(layout, m, n, k, None) == _PATH_KERNEL
        _routes[key] = hit
    return hit


def _usable(*tensors):
    return all(t.is_cuda and t.dtype == torch.float16 and t.is_contiguous() for t in tensors)


def _run(layout, a, b, m, n, k):
    out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    lib = _library()
    ws_bytes = lib.anvil_hgemm_workspace_bytes(layout, m, n, k)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device=a.device) if ws_bytes else None
    stream = torch.cuda.current_stream(a.device).cuda_stream
    rc = lib.anvil_hgemm(layout, m, n, k, a.data_ptr(), b.data_ptr(), out.data_ptr(),
                         ws.data_ptr() if ws is not None else None, ws_bytes, stream)
    if rc != 0:
        raise RuntimeError("anvil_hgemm failed: " + lib.anvil_hgemm_status_string(rc).decode())
    return out


def matmul(a, b):
    """a @ b for 2-D a [M, K] and b [K, N]; other cases go to torch.matmul."""
    if a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0] and _usable(a, b) \
            and a.device == b.device:
        m, k = a.shape
        n = b.shape[1]
        if m > 0 and n > 0 and k > 0 and _served(_NN, m, n, k, a.device.index):
            return _run(_NN, a, b, m, n, k)
    return torch.matmul(a, b)


def linear(x, w):
    """x @ w.T for x [..., K] and w [N, K] (torch.nn.functional.linear without bias)."""
    if x.dim() >= 1 and w.dim() == 2 and x.shape[-1] == w.shape[1] and _usable(x, w) \
            and x.device == w.device:
        k = w.shape[1]
        n = w.shape[0]
        m = x.numel() // k if k else 0
        if m > 0 and n > 0 and k > 0 and _served(_NT, m, n, k, x.device.index):
            return _run(_NT, x, w, m, n, k).view(*x.shape[:-1], n)
    return torch.nn.functional.linear(x, w)
