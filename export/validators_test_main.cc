// Built by export_test against a package's runtime (src/anvil_hgemm.cc) with
// this file as its table: checks the validators' comparison without a GPU.
// Prints each case and exits 0 when all behave.
#include <cstdio>
#include <string>

#include "anvil_hgemm_table.h"

namespace anvil_hgemm_internal {
const Validators kValidators = {"H100-80GB-HBM3", "sm_90a", 13000, 13000, 130100};
const Kernel kKernels[] = {{nullptr, nullptr, nullptr, nullptr}};
const int kKernelCount = 0;
const Entry kEntries[] = {{0, 0, 0, 0, -1, -1}};
const int kEntryCount = 0;
const unsigned char kLtAlgos[][64] = {{0}};
const int kLtAlgoCount = 0;
}  // namespace anvil_hgemm_internal

int main() {
  using namespace anvil_hgemm_internal;
  struct Case {
    Observed have;
    const char* expect;  // substring of the mismatch text, "" for a match
  } cases[] = {
      {{"NVIDIA H100 80GB HBM3", 9, 0, 13000, 13000, 130100}, ""},
      {{"NVIDIA H200", 9, 0, 13000, 13000, 130100}, "GPU H200 (measured on H100-80GB-HBM3)"},
      {{"NVIDIA H100 80GB HBM3", 8, 0, 13000, 13000, 130100}, "arch sm_80"},
      {{"NVIDIA H100 80GB HBM3", 9, 0, 12080, 13000, 130100}, "driver 12080 (measured on 13000)"},
      {{"NVIDIA H100 80GB HBM3", 9, 0, 13000, 12040, 130100}, "CUDA runtime 12040"},
      {{"NVIDIA H100 80GB HBM3", 9, 0, 13000, 13000, 130200}, "cuBLAS 130200 (measured on 130100)"},
  };
  int failed = 0;
  for (const Case& c : cases) {
    const std::string why = Mismatches(c.have, kValidators);
    const bool ok = *c.expect == '\0' ? why.empty() : why.find(c.expect) != std::string::npos;
    std::printf("%s %s: '%s'\n", ok ? "ok" : "FAILED", c.have.device_name, why.c_str());
    failed += ok ? 0 : 1;
  }
  return failed;
}
