#include "worker/runner/device_ops.h"

namespace anvil::runner {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 4096 ? (b == 0 ? 1 : b) : 4096);
}

__device__ uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ float Uniform01(uint64_t bits) {  // (0, 1]
  return (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
}

__global__ void FillNormalKernel(__half* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t r = Mix(seed ^ Mix(i));
    float u1 = Uniform01(r), u2 = Uniform01(Mix(r));
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    p[i] = __float2half_rn(z);
  }
}

__global__ void FillIntegersKernel(__half* p, size_t n, uint64_t seed, int max_value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t r = Mix(seed ^ Mix(i));
    p[i] = __int2half_rn(static_cast<int>(r % uint64_t(max_value + 1)));
  }
}

__global__ void FillBitsKernel(__half* p, size_t n, uint16_t bits) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    p[i] = __ushort_as_half(bits);
  }
}

template <typename T>
__device__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}

__global__ void CompareKernel(const __half* c, const float* ref, size_t n, CompareStats* out) {
  double sd = 0, sr = 0, se = 0;
  unsigned long long nonfinite = 0, poison = 0, mismatch = 0;
  float maxd = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint16_t bits = __half_as_ushort(c[i]);
    float r = ref[i];
    sr += double(r) * r;
    if (bits == kPoisonBits) { ++poison; ++mismatch; continue; }
    float v = __half2float(c[i]);
    if (!isfinite(v)) { ++nonfinite; ++mismatch; continue; }
    float d = fabsf(v - r);
    sd += double(d) * d;
    float e = v - __half2float(__float2half_rn(r));
    se += double(e) * e;
    maxd = fmaxf(maxd, d);
    if (bits != __half_as_ushort(__float2half_rn(r))) ++mismatch;
  }
  sd = WarpSum(sd); sr = WarpSum(sr); se = WarpSum(se);
  nonfinite = WarpSum(nonfinite); poison = WarpSum(poison); mismatch = WarpSum(mismatch);
  maxd = WarpMax(maxd);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->sum_sq_diff, sd);
    atomicAdd(&out->sum_sq_ref, sr);
    atomicAdd(&out->sum_sq_excess, se);
    atomicAdd(&out->nonfinite, nonfinite);
    atomicAdd(&out->poison, poison);
    atomicAdd(&out->rounded_mismatch, mismatch);
    // Non-negative floats order like their bit patterns.
    atomicMax(reinterpret_cast<unsigned int*>(&out->max_abs_diff), __float_as_uint(maxd));
  }
}

__global__ void CountBytesNotKernel(const uint8_t* p, size_t bytes, uint8_t value,
                                    unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes;
       i += size_t(gridDim.x) * blockDim.x) {
    local += p[i] != value;
  }
  local = WarpSum(local);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

__global__ void CountDiffsKernel(const __half* a, const __half* b, size_t n,
                                 unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    local += __half_as_ushort(a[i]) != __half_as_ushort(b[i]);
  }
  local = WarpSum(local);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

}  // namespace

cudaError_t FillNormal(__half* p, size_t n, uint64_t seed, cudaStream_t stream) {
  FillNormalKernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t FillIntegers(__half* p, size_t n, uint64_t seed, int max_value, cudaStream_t stream) {
  FillIntegersKernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, seed, max_value);
  return cudaGetLastError();
}

cudaError_t FillBits(__half* p, size_t n, uint16_t bits, cudaStream_t stream) {
  FillBitsKernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, bits);
  return cudaGetLastError();
}

cudaError_t Compare(const __half* c, const float* ref, size_t n, CompareStats* stats,
                    cudaStream_t stream) {
  CompareKernel<<<Blocks(n), kThreads, 0, stream>>>(c, ref, n, stats);
  return cudaGetLastError();
}

cudaError_t CountBytesNot(const void* p, size_t bytes, uint8_t value,
                          unsigned long long* count, cudaStream_t stream) {
  CountBytesNotKernel<<<Blocks(bytes), kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(p), bytes, value, count);
  return cudaGetLastError();
}

cudaError_t CountDiffs(const __half* a, const __half* b, size_t n, unsigned long long* count,
                       cudaStream_t stream) {
  CountDiffsKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, n, count);
  return cudaGetLastError();
}

}  // namespace anvil::runner
