// The runtime of an Anvil kernel package: validators, dispatch on
// (layout, M, N, K), cuBLASLt plans for tuned shapes and per-thread handles.
// Contract: include/anvil_hgemm.h.
#include "anvil_hgemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil_hgemm_table.h"

namespace {

using namespace anvil_hgemm_internal;

constexpr int kMaxDevices = 64;
constexpr size_t kVendorWorkspace = size_t(64) << 20;  // what the vendor figures used

// ---- Validators: one check per device, the note on stderr once per process.
struct Validation {
  std::once_flag once;
  bool ok = false;
  std::string message;
};
Validation g_validation[kMaxDevices];
std::atomic<bool> g_noted{false};

std::string GpuName(const char* raw) {
  std::string n = raw;
  if (n.rfind("NVIDIA ", 0) == 0) n = n.substr(7);
  while (!n.empty() && n.back() == ' ') n.pop_back();
  while (!n.empty() && n.front() == ' ') n.erase(0, 1);
  std::replace(n.begin(), n.end(), ' ', '-');
  return n;
}

void Expect(const char* what, const std::string& have, const std::string& want, std::string* why) {
  if (have == want) return;
  if (!why->empty()) *why += ", ";
  *why += std::string(what) + " " + have + " (measured on " + want + ")";
}

// The validators' mismatches on `device`, empty when it matches.
std::string CheckDevice(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "device properties unreadable";
  int driver = 0, runtime = 0, major = 0, minor = 0, patch = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  const Observed have{prop.name, prop.major, prop.minor, driver, runtime,
                      major * 10000 + minor * 100 + patch};
  return Mismatches(have, kValidators);
}

const Validation& Validate(int device) {
  static Validation out_of_range;
  if (device < 0 || device >= kMaxDevices) {
    out_of_range.message = "device ordinal out of range: the table is off";
    return out_of_range;
  }
  Validation& v = g_validation[device];
  std::call_once(v.once, [&] {
    const std::string why = CheckDevice(device);
    v.ok = why.empty();
    v.message = v.ok ? "ok: the table is in use"
                     : "device " + std::to_string(device) + " differs: " + why +
                           "; every shape goes to cuBLAS";
    if (!v.ok && !g_noted.exchange(true)) std::fprintf(stderr, "anvil_hgemm: %s\n", v.message.c_str());
  });
  return v;
}

// ---- Handles: per thread and device; an exiting thread leaves them to others.
struct Handles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
};
struct Pool {
  std::mutex mu;
  std::vector<Handles> free[kMaxDevices];
};
Pool& ThePool() {
  static Pool* pool = new Pool;  // never destroyed: threads may exit after main
  return *pool;
}
struct ThreadHandles {
  Handles h[kMaxDevices];
  ~ThreadHandles() {
    Pool& p = ThePool();
    std::lock_guard<std::mutex> lock(p.mu);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (h[d].blas != nullptr) p.free[d].push_back(h[d]);
    }
  }
};
thread_local ThreadHandles t_handles;

int GetHandles(int device, bool capturing, Handles** out) {
  Handles& h = t_handles.h[device];
  if (h.blas == nullptr) {
    Pool& p = ThePool();
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (!p.free[device].empty()) {
        h = p.free[device].back();
        p.free[device].pop_back();
      }
    }
    if (h.blas == nullptr) {
      if (capturing) return ANVIL_HGEMM_NOT_INITIALIZED;
      if (cublasCreate(&h.blas) != CUBLAS_STATUS_SUCCESS) return ANVIL_HGEMM_CUBLAS_ERROR;
      if (cublasLtCreate(&h.lt) != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h.blas);
        h.blas = nullptr;
        return ANVIL_HGEMM_CUBLAS_ERROR;
      }
    }
  }
  *out = &h;
  return ANVIL_HGEMM_OK;
}

// ---- cuBLASLt plans for table shapes with a tuned algorithm. Row-major
// C = A * op(B) is column-major C^T = op(B)^T * A^T: the vendor sees (N, M)
// with B first.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::atomic<long long> workspace[kMaxDevices];  // -2 unchecked, -1 unusable
};
std::vector<std::unique_ptr<LtPlan>>& Plans() {
  static std::vector<std::unique_ptr<LtPlan>>* plans = [] {
    auto* v = new std::vector<std::unique_ptr<LtPlan>>(kEntryCount);
    for (int i = 0; i < kEntryCount; ++i) {
      const Entry& e = kEntries[i];
      if (e.lt_algo < 0) continue;
      auto p = std::make_unique<LtPlan>();
      for (auto& w : p->workspace) w.store(-2);
      const bool nt = e.layout == ANVIL_HGEMM_NT;
      cublasOperation_t op_b = nt ? CUBLAS_OP_T : CUBLAS_OP_N, op_n = CUBLAS_OP_N;
      bool ok = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
                cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b,
                                               sizeof(op_b)) == 0 &&
                cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n,
                                               sizeof(op_n)) == 0 &&
                cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16F, nt ? e.k : e.n, nt ? e.n : e.k,
                                           nt ? e.k : e.n) == 0 &&
                cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16F, e.k, e.m, e.k) == 0 &&
                cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16F, e.n, e.m, e.n) == 0;
      std::memcpy(&p->algo, kLtAlgos[e.lt_algo], std::min(sizeof(p->algo), size_t(64)));
      if (ok) (*v)[i] = std::move(p);  // a plan that cannot be described stays cuBLAS
    }
    return v;
  }();
  return *plans;
}

// The workspace the plan needs on `device`, -1 when its algorithm cannot run.
long long PlanWorkspace(LtPlan& p, cublasLtHandle_t lt, int device) {
  long long w = p.workspace[device].load();
  if (w != -2) return w;
  cublasLtMatmulHeuristicResult_t r{};
  w = cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.c, p.c, &p.algo, &r) == CUBLAS_STATUS_SUCCESS
          ? static_cast<long long>(r.workspaceSize)
          : -1;
  p.workspace[device].store(w);
  return w;
}

const Entry* Find(int layout, int m, int n, int k) {
  const Entry key{layout, m, n, k, -1, -1};
  auto less = [](const Entry& x, const Entry& y) {
    if (x.layout != y.layout) return x.layout < y.layout;
    if (x.m != y.m) return x.m < y.m;
    if (x.n != y.n) return x.n < y.n;
    return x.k < y.k;
  };
  const Entry* end = kEntries + kEntryCount;
  const Entry* e = std::lower_bound(kEntries, end, key, less);
  return e != end && !less(key, *e) ? e : nullptr;
}

bool ValidArgs(int layout, int m, int n, int k) {
  return (layout == ANVIL_HGEMM_NT || layout == ANVIL_HGEMM_NN) && m > 0 && n > 0 && k > 0;
}

// The path of a shape on `device`, with its table entry (null for cuBLAS).
int Route(int layout, int m, int n, int k, int device, const Entry** entry) {
  *entry = nullptr;
  if (!Validate(device).ok) return ANVIL_HGEMM_PATH_CUBLAS;
  const Entry* e = Find(layout, m, n, k);
  if (e == nullptr) return ANVIL_HGEMM_PATH_CUBLAS;
  *entry = e;
  if (e->kernel >= 0) return ANVIL_HGEMM_PATH_KERNEL;
  if (e->lt_algo >= 0 && Plans()[e - kEntries] != nullptr) return ANVIL_HGEMM_PATH_CUBLASLT;
  return ANVIL_HGEMM_PATH_CUBLAS;
}

int CublasGemm(Handles& h, int layout, int m, int n, int k, const void* a, const void* b, void* c,
               void* ws, size_t bytes, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  const bool nt = layout == ANVIL_HGEMM_NT;
  if (cublasSetStream(h.blas, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(h.blas, ws, ws != nullptr ? bytes : 0) != CUBLAS_STATUS_SUCCESS) {
    return ANVIL_HGEMM_CUBLAS_ERROR;
  }
  cublasStatus_t st = cublasGemmEx(h.blas, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                                   &alpha, b, CUDA_R_16F, nt ? k : n, a, CUDA_R_16F, k, &beta, c,
                                   CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? ANVIL_HGEMM_OK : ANVIL_HGEMM_CUBLAS_ERROR;
}

int VendorGemm(int path, const Entry* e, int device, int layout, int m, int n, int k,
               const void* a, const void* b, void* c, void* ws, size_t bytes,
               cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return ANVIL_HGEMM_CUDA_ERROR;
  Handles* h = nullptr;
  int rc = GetHandles(device, capture != cudaStreamCaptureStatusNone, &h);
  if (rc != ANVIL_HGEMM_OK) return rc;
  if (path == ANVIL_HGEMM_PATH_CUBLASLT) {
    LtPlan& p = *Plans()[e - kEntries];
    const long long need = PlanWorkspace(p, h->lt, device);
    if (need >= 0 && (need == 0 || (ws != nullptr && static_cast<size_t>(need) <= bytes))) {
      const float alpha = 1.0f, beta = 0.0f;
      cublasStatus_t st = cublasLtMatmul(h->lt, p.desc, &alpha, b, p.a, a, p.b, &beta, c, p.c, c,
                                         p.c, &p.algo, ws, ws != nullptr ? bytes : 0, stream);
      return st == CUBLAS_STATUS_SUCCESS ? ANVIL_HGEMM_OK : ANVIL_HGEMM_CUBLAS_ERROR;
    }
  }
  return CublasGemm(*h, layout, m, n, k, a, b, c, ws, bytes, stream);
}

}  // namespace

namespace anvil_hgemm_internal {

std::string Mismatches(const Observed& have, const Validators& want) {
  const std::string arch = "sm_" + std::to_string(have.major) + std::to_string(have.minor) +
                           (have.major == 9 ? "a" : "");
  std::string why;
  Expect("GPU", GpuName(have.device_name), want.gpu, &why);
  Expect("arch", arch, want.arch, &why);
  Expect("driver", std::to_string(have.driver), std::to_string(want.driver), &why);
  Expect("CUDA runtime", std::to_string(have.cudart), std::to_string(want.cudart), &why);
  Expect("cuBLAS", std::to_string(have.cublas), std::to_string(want.cublas), &why);
  return why;
}

}  // namespace anvil_hgemm_internal

extern "C" int anvil_hgemm(int layout, int M, int N, int K, const void* A, const void* B, void* C,
                           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!ValidArgs(layout, M, N, K) || A == nullptr || B == nullptr || C == nullptr) {
    return ANVIL_HGEMM_INVALID_ARGUMENT;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ANVIL_HGEMM_CUDA_ERROR;
  const Entry* e = nullptr;
  const int path = Route(layout, M, N, K, device, &e);
  if (path != ANVIL_HGEMM_PATH_KERNEL) {
    return VendorGemm(path, e, device, layout, M, N, K, A, B, C, workspace, workspace_bytes, stream);
  }
  const Kernel& kernel = kKernels[e->kernel];
  const size_t need = kernel.workspace(M, N, K);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) {
    return ANVIL_HGEMM_WORKSPACE_TOO_SMALL;
  }
  return kernel.gemm(static_cast<const __half*>(A), static_cast<const __half*>(B),
                     static_cast<__half*>(C), M, N, K, workspace, stream) == 0
             ? ANVIL_HGEMM_OK
             : ANVIL_HGEMM_KERNEL_ERROR;
}

extern "C" size_t anvil_hgemm_workspace_bytes(int layout, int M, int N, int K) {
  int device = 0;
  if (!ValidArgs(layout, M, N, K) || cudaGetDevice(&device) != cudaSuccess) return 0;
  const Entry* e = nullptr;
  if (Route(layout, M, N, K, device, &e) != ANVIL_HGEMM_PATH_KERNEL) return kVendorWorkspace;
  return kKernels[e->kernel].workspace(M, N, K);
}

extern "C" int anvil_hgemm_dispatch(int layout, int M, int N, int K, const char** name) {
  int device = 0;
  if (!ValidArgs(layout, M, N, K) || cudaGetDevice(&device) != cudaSuccess) return 0;
  const Entry* e = nullptr;
  const int path = Route(layout, M, N, K, device, &e);
  if (name != nullptr) {
    *name = path == ANVIL_HGEMM_PATH_KERNEL     ? kKernels[e->kernel].name
            : path == ANVIL_HGEMM_PATH_CUBLASLT ? "cublaslt"
                                                : "cublas";
  }
  return path;
}

extern "C" int anvil_hgemm_init(void) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ANVIL_HGEMM_CUDA_ERROR;
  if (device >= kMaxDevices) return ANVIL_HGEMM_INVALID_ARGUMENT;
  const bool table = Validate(device).ok;
  Handles* h = nullptr;
  int rc = GetHandles(device, /*capturing=*/false, &h);
  if (rc != ANVIL_HGEMM_OK || !table) return rc;
  for (const std::unique_ptr<LtPlan>& p : Plans()) {
    if (p != nullptr) PlanWorkspace(*p, h->lt, device);
  }
  return ANVIL_HGEMM_OK;
}

extern "C" int anvil_hgemm_status(void) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ANVIL_HGEMM_CUDA_ERROR;
  return Validate(device).ok ? ANVIL_HGEMM_OK : ANVIL_HGEMM_VALIDATION_MISMATCH;
}

extern "C" const char* anvil_hgemm_status_message(void) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "no CUDA device";
  return Validate(device).message.c_str();
}

extern "C" const char* anvil_hgemm_status_string(int status) {
  switch (status) {
    case ANVIL_HGEMM_OK: return "ok";
    case ANVIL_HGEMM_INVALID_ARGUMENT: return "invalid argument";
    case ANVIL_HGEMM_WORKSPACE_TOO_SMALL: return "workspace too small";
    case ANVIL_HGEMM_NOT_INITIALIZED: return "vendor call inside a capture before anvil_hgemm_init";
    case ANVIL_HGEMM_CUDA_ERROR: return "CUDA error";
    case ANVIL_HGEMM_CUBLAS_ERROR: return "cuBLAS error";
    case ANVIL_HGEMM_KERNEL_ERROR: return "kernel error";
    case ANVIL_HGEMM_VALIDATION_MISMATCH: return "validation mismatch: the table is off";
    default: return "unknown status";
  }
}

extern "C" int anvil_hgemm_table_size(void) { return kEntryCount; }

extern "C" int anvil_hgemm_table_entry(int index, int* layout, int* M, int* N, int* K) {
  if (index < 0 || index >= kEntryCount) return 1;
  const Entry& e = kEntries[index];
  if (layout != nullptr) *layout = e.layout;
  if (M != nullptr) *M = e.m;
  if (N != nullptr) *N = e.n;
  if (K != nullptr) *K = e.k;
  return 0;
}
