// seeds/03_wgmma_tma/layout_check.cu: host-only cross-check of kernel.cu's
// shared-memory layouts and wgmma descriptor fields against CuTe. Not a candidate
// (no anvil_gemm); needs no GPU.
//
//   ctest -R wgmma_layout_check (or by hand: nvcc -std=c++17 -I third_party/cutlass/include \
//        -o layout_check seeds/03_wgmma_tma/layout_check.cu && ./layout_check)
//
// What it checks, for BK in {64,128} and BN in {64,128,256} (NN's MN-major B)
// and 64/128/256 rows (K-major A and NT's B):
//  1. The byte offset at which a 128B-swizzled TMA box puts element (i, o)
//     (row o of 128 bytes, 16-byte chunk index XOR (row % 8), 1024-aligned base),
//     with kernel.cu's placement of boxes (NN: box j of {64 N, BK K} at
//     j*BK*128; K-major: the box {64 K, rows} of k-sub-tile j at j*rows*128),
//     equals CuTe's canonical GMMA layout (Layout_{MN,K}_SW128_Atom tiled to the
//     stage; MN: K-first atom order) at every (mn, k).
//  2. kernel.cu's descriptor start offset, LBO and SBO for every k16 step equal
//     what CuTe's make_gmma_desc<Major::{MN,K}> derives from that layout.
// Prints "OK" and returns 0 when all match. (On the host CuTe also prints
// "cast_smem_ptr_to_uint not supported" for the descriptor's address field; that
// field is checked through the tensor's data pointer instead, so ignore it.)

#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include <cstdio>

using namespace cute;
namespace G = cute::SM90::GMMA;

namespace {

int failures = 0;

// Byte offset of element (inner i, outer o) in a 128B-swizzled TMA box.
int tma_offset(int i, int o) {
  const int b = o * 128 + i * 2;
  const int chunk = (b >> 4) & 7;
  const int row = (b >> 7) & 7;
  return (b & ~0x70) | ((chunk ^ row) << 4);
}

void expect(bool ok, const char* what, int a, int b) {
  if (!ok && failures++ < 10) std::printf("MISMATCH %s: kernel %d, cute %d\n", what, a, b);
}

template <class Desc>
void expect_desc(const Desc& d, int lbo, int sbo) {
  expect(d.bitfield.layout_type_ == 1, "layout type (1 = SW128)", 1, d.bitfield.layout_type_);
  expect(d.bitfield.leading_byte_offset_ * 16 == lbo, "LBO", lbo,
         d.bitfield.leading_byte_offset_ * 16);
  expect(d.bitfield.stride_byte_offset_ * 16 == sbo, "SBO", sbo,
         d.bitfield.stride_byte_offset_ * 16);
}

alignas(1024) half_t buffer[256 * 128];

// NN's B: MN-major, BN x BK per stage, BN/64 boxes of {64 N, BK K}.
template <int BN, int BK>
void check_mn_major() {
  auto layout = tile_to_shape(G::Layout_MN_SW128_Atom<half_t>{},
                              make_shape(Int<BN>{}, Int<BK>{}), Step<_2, _1>{});
  auto stage = make_tensor(make_smem_ptr(buffer), layout);
  constexpr int kBoxBytes = BK * 128;
  for (int n = 0; n < BN; ++n)
    for (int k = 0; k < BK; ++k) {
      const int mine = (n / 64) * kBoxBytes + tma_offset(n % 64, k);
      const int cute_off = int((char*)raw_pointer_cast(&stage(n, k)) - (char*)buffer);
      expect(mine == cute_off, "MN-major element offset", mine, cute_off);
    }
  for (int kk = 0; kk < BK / 16; ++kk) {
    auto slice = local_tile(stage, make_shape(Int<BN>{}, Int<16>{}), make_coord(0, kk));
    const int start = int((char*)raw_pointer_cast(slice.data()) - (char*)buffer);
    expect(start == kk * 2048, "MN-major k16 start", kk * 2048, start);
    // LBO is meaningless when BN == 64 (one N block); CuTe then leaves it 0.
    expect_desc(G::make_gmma_desc<G::Major::MN>(slice), BN > 64 ? kBoxBytes : 0, 1024);
  }
}

// A (and NT's B): K-major, ROWS x BK per stage, BK/64 boxes {64 K, ROWS}, the
// k-sub-tile j's at j * ROWS * 128 bytes.
template <int ROWS, int BK>
void check_k_major() {
  auto layout = tile_to_shape(G::Layout_K_SW128_Atom<half_t>{},
                              make_shape(Int<ROWS>{}, Int<BK>{}));
  auto stage = make_tensor(make_smem_ptr(buffer), layout);
  constexpr int kSubBytes = ROWS * 128;
  for (int r = 0; r < ROWS; ++r)
    for (int k = 0; k < BK; ++k) {
      const int mine = (k / 64) * kSubBytes + tma_offset(k % 64, r);
      const int cute_off = int((char*)raw_pointer_cast(&stage(r, k)) - (char*)buffer);
      expect(mine == cute_off, "K-major element offset", mine, cute_off);
    }
  for (int mt = 0; mt < ROWS / 64; ++mt)
    for (int kk = 0; kk < BK / 16; ++kk) {
      auto slice = local_tile(stage, make_shape(Int<64>{}, Int<16>{}), make_coord(mt, kk));
      const int start = int((char*)raw_pointer_cast(slice.data()) - (char*)buffer);
      const int mine = (kk / 4) * kSubBytes + mt * 64 * 128 + (kk % 4) * 32;
      expect(start == mine, "K-major m64/k16 start", mine, start);
      expect_desc(G::make_gmma_desc<G::Major::K>(slice), 16, 1024);
    }
}

template <int BK>
void check_all() {
  check_mn_major<64, BK>();
  check_mn_major<128, BK>();
  check_mn_major<256, BK>();
  check_k_major<64, BK>();
  check_k_major<128, BK>();
  check_k_major<256, BK>();
}

}  // namespace

int main() {
  check_all<64>();
  check_all<128>();
  std::printf("%s (%d mismatches)\n", failures == 0 ? "OK" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
