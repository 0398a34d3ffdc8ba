// The implementations the runner times side by side: the candidate (loaded
// from its shared object) and the vendor baselines (cuBLAS, cuBLASLt with its
// heuristic's first choice, cuBLASLt autotuned). All compute the same
// row-major problem: C[MxN] = A[MxK] * B^T (nt, B is NxK) or A * B (nn, B is KxN).
// Not thread-safe; one runner thread drives them.
#ifndef ANVIL_WORKER_RUNNER_GEMM_IMPLS_H_
#define ANVIL_WORKER_RUNNER_GEMM_IMPLS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "worker/runner/cuda_util.h"

namespace anvil::runner {

struct GemmShape {
  int m = 0, n = 0, k = 0;
  v1::Layout layout = v1::LAYOUT_NT;
};

// One way of computing the problem. Run enqueues the whole call on `stream`
// and returns 0 on success (a candidate's own return code, or a vendor status).
class GemmImpl {
 public:
  virtual ~GemmImpl() = default;
  virtual const std::string& name() const = 0;
  virtual int Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) = 0;
};

// The candidate's shared object, loaded once per runner.
class CandidateLibrary {
 public:
  using WorkspaceFn = size_t (*)(int, int, int);
  using GemmFn = int (*)(const __half*, const __half*, __half*, int, int, int, void*,
                         cudaStream_t);
  static absl::StatusOr<std::unique_ptr<CandidateLibrary>> Open(const std::string& path);
  ~CandidateLibrary();
  WorkspaceFn workspace_fn() const { return workspace_; }
  GemmFn gemm_fn() const { return gemm_; }

 private:
  void* handle_ = nullptr;
  WorkspaceFn workspace_ = nullptr;
  GemmFn gemm_ = nullptr;
};

// The candidate bound to one problem and its workspace.
class CandidateGemm : public GemmImpl {
 public:
  CandidateGemm(const CandidateLibrary& lib, GemmShape shape, void* workspace)
      : fn_(lib.gemm_fn()), shape_(shape), workspace_(workspace) {}
  const std::string& name() const override { return name_; }
  int Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) override {
    return fn_(a, b, c, shape_.m, shape_.n, shape_.k, workspace_, stream);
  }

 private:
  CandidateLibrary::GemmFn fn_;
  GemmShape shape_;
  void* workspace_;
  std::string name_ = "candidate";
};

// cublasGemmEx: fp16 in, fp32 compute, fp16 out.
class CublasGemm : public GemmImpl {
 public:
  CublasGemm(cublasHandle_t handle, GemmShape shape) : handle_(handle), shape_(shape) {}
  const std::string& name() const override { return name_; }
  int Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) override;

 private:
  cublasHandle_t handle_;
  GemmShape shape_;
  std::string name_ = "cublas";
};

// fp32 reference: the same product with an fp32 C, used to check results.
absl::Status ReferenceGemm(cublasHandle_t handle, const GemmShape& shape, const __half* a,
                           const __half* b, float* c, cudaStream_t stream);

// cublasLtMatmul with fp32 compute and scale type and a real workspace.
class LtGemm : public GemmImpl {
 public:
  static absl::StatusOr<std::unique_ptr<LtGemm>> Create(cublasLtHandle_t handle,
                                                        GemmShape shape, void* workspace,
                                                        size_t workspace_bytes,
                                                        std::string name);
  ~LtGemm() override;
  const std::string& name() const override { return name_; }
  int Run(const __half* a, const __half* b, __half* c, cudaStream_t stream) override;
  // The heuristic's candidates, best first (at most `count`).
  absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> Heuristics(int count);
  void set_algo(const cublasLtMatmulAlgo_t& algo) { algo_ = algo; }
  // OK when `algo` can run this problem with the workspace given.
  absl::Status CheckAlgo(const cublasLtMatmulAlgo_t& algo);

 private:
  LtGemm() = default;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::string name_;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_GEMM_IMPLS_H_
