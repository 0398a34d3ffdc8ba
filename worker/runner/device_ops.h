// Device-side helpers of the runner: input generation, poisoning, guard
// bands and result comparison. Every function enqueues on `stream` and
// returns the launch status; nothing here synchronises.
#ifndef ANVIL_WORKER_RUNNER_DEVICE_OPS_H_
#define ANVIL_WORKER_RUNNER_DEVICE_OPS_H_

#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace anvil::runner {

// fp16 bit pattern written into C before every call: a quiet NaN that no
// arithmetic produces (kernels yield 0x7E00 or sign variants).
inline constexpr uint16_t kPoisonBits = 0x7FFF;
// Byte written into guard bands around every buffer.
inline constexpr uint8_t kGuardByte = 0xA5;

// Standard normal fp16 values from a counter-based generator keyed by seed.
cudaError_t FillNormal(__half* p, size_t n, uint64_t seed, cudaStream_t stream);
// Integers uniform in [0, max_value] (exactly representable in fp16).
cudaError_t FillIntegers(__half* p, size_t n, uint64_t seed, int max_value, cudaStream_t stream);
// Every element set to the raw 16-bit pattern.
cudaError_t FillBits(__half* p, size_t n, uint16_t bits, cudaStream_t stream);

// Result of comparing an fp16 output with an fp32 reference.
struct CompareStats {
  double sum_sq_diff;                   // sum (c - ref)^2 over finite c
  double sum_sq_ref;                    // sum ref^2
  double sum_sq_excess;                 // sum (c - round_to_fp16(ref))^2 over finite c
  unsigned long long nonfinite;         // c is NaN or Inf (poison excluded)
  unsigned long long poison;            // c still holds kPoisonBits
  unsigned long long rounded_mismatch;  // c != round-to-nearest(ref) bit for bit
  float max_abs_diff;                   // max |c - ref| over finite c
};
// Accumulates into *stats (device memory, zeroed by the caller).
cudaError_t Compare(const __half* c, const float* ref, size_t n, CompareStats* stats,
                    cudaStream_t stream);
// Adds to *count (device) the number of bytes in [p, p+bytes) != value.
cudaError_t CountBytesNot(const void* p, size_t bytes, uint8_t value,
                          unsigned long long* count, cudaStream_t stream);
// Adds to *count (device) the number of 16-bit elements where a != b.
cudaError_t CountDiffs(const __half* a, const __half* b, size_t n, unsigned long long* count,
                       cudaStream_t stream);

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_DEVICE_OPS_H_
