#include "worker/runner/gemm_impls.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anvil::runner {
namespace {

// Row-major C = A * op(B) is column-major C^T = op(B)^T * A^T, so the vendor
// call sees (m, n) = (N, M) with B first. nt: B (NxK row-major) is a KxN
// column-major matrix to transpose; nn: B (KxN row-major) is NxK column-major.
struct ColumnMajorCall {
  cublasOperation_t op_b;
  int ld_b;
};
ColumnMajorCall Describe(const GemmShape& s) {
  if (s.layout == v1::LAYOUT_NT) return {CUBLAS_OP_T, s.k};
  return {CUBLAS_OP_N, s.n};
}

int GemmEx(cublasHandle_t h, const GemmShape& s, const __half* a, const __half* b, void* c,
           cudaDataType c_type, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  ColumnMajorCall call = Describe(s);
  cublasSetStream(h, stream);
  return cublasGemmEx(h, call.op_b, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, CUDA_R_16F,
                      call.ld_b, a, CUDA_R_16F, s.k, &beta, c, c_type, s.n,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

absl::Status LtStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusString(st)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CandidateLibrary>> CandidateLibrary::Open(
    const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return absl::InvalidArgumentError(absl::StrCat("cannot load candidate: ", dlerror()));
  auto lib = std::unique_ptr<CandidateLibrary>(new CandidateLibrary);
  lib->handle_ = h;
  lib->workspace_ = reinterpret_cast<WorkspaceFn>(dlsym(h, "anvil_workspace_bytes"));
  lib->gemm_ = reinterpret_cast<GemmFn>(dlsym(h, "anvil_gemm"));
  if (!lib->workspace_ || !lib->gemm_) {
    return absl::InvalidArgumentError(
        "candidate does not export anvil_workspace_bytes and anvil_gemm with C linkage");
  }
  return lib;
}

CandidateLibrary::~CandidateLibrary() {
  // The library stays mapped: its kernels may still be referenced by the
  // CUDA runtime until the process exits.
}

int CublasGemm::Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) {
  return GemmEx(handle_, shape_, a, b, c, CUDA_R_16F, stream);
}

absl::Status ReferenceGemm(cublasHandle_t handle, const GemmShape& shape, const __half* a,
                           const __half* b, float* c, cudaStream_t stream) {
  return LtStatus(static_cast<cublasStatus_t>(
                      GemmEx(handle, shape, a, b, c, CUDA_R_32F, stream)),
                  "reference cublasGemmEx");
}

absl::StatusOr<std::unique_ptr<LtGemm>> LtGemm::Create(cublasLtHandle_t handle,
                                                       GemmShape shape, void* workspace,
                                                       size_t workspace_bytes,
                                                       std::string name) {
  auto g = std::unique_ptr<LtGemm>(new LtGemm);
  g->handle_ = handle;
  g->workspace_ = workspace;
  g->workspace_bytes_ = workspace_bytes;
  g->name_ = std::move(name);
  ColumnMajorCall call = Describe(shape);
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatmulDescCreate(&g->desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc"));
  cublasOperation_t op_n = CUBLAS_OP_N;
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_TRANSA, &call.op_b,
                                     sizeof(call.op_b)),
      "transa"));
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatmulDescSetAttribute(g->desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)),
      "transb"));
  // Vendor "A" is our B, vendor "B" is our A (see ColumnMajorCall).
  bool bt = call.op_b == CUBLAS_OP_T;
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatrixLayoutCreate(&g->a_, CUDA_R_16F, bt ? shape.k : shape.n,
                                 bt ? shape.n : shape.k, call.ld_b),
      "layout A"));
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatrixLayoutCreate(&g->b_, CUDA_R_16F, shape.k, shape.m, shape.k), "layout B"));
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatrixLayoutCreate(&g->c_, CUDA_R_16F, shape.n, shape.m, shape.n), "layout C"));
  return g;
}

LtGemm::~LtGemm() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> LtGemm::Heuristics(int count) {
  cublasLtMatmulPreference_t pref = nullptr;
  ANVIL_RETURN_IF_ERROR(LtStatus(cublasLtMatmulPreferenceCreate(&pref), "preference"));
  uint64_t ws = workspace_bytes_;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  std::vector<cublasLtMatmulHeuristicResult_t> results(count);
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, c_, c_, pref,
                                                     count, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ANVIL_RETURN_IF_ERROR(LtStatus(st, "cublasLtMatmulAlgoGetHeuristic"));
  std::vector<cublasLtMatmulAlgo_t> algos;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[i].algo);
  }
  if (algos.empty()) return absl::NotFoundError("cuBLASLt heuristic returned no algorithm");
  return algos;
}

absl::Status LtGemm::CheckAlgo(const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  ANVIL_RETURN_IF_ERROR(LtStatus(
      cublasLtMatmulAlgoCheck(handle_, desc_, a_, b_, c_, c_, &algo, &result), "algo check"));
  if (result.workspaceSize > workspace_bytes_) {
    return absl::FailedPreconditionError("cached algorithm needs more workspace");
  }
  return absl::OkStatus();
}

int LtGemm::Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, desc_, &alpha, b, a_, a, b_, &beta, c, c_, c, c_, &algo_,
                        workspace_, workspace_bytes_, stream);
}

}  // namespace anvil::runner
