#include "worker/ptxas.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil {
namespace {

// The number just before `unit` in `line` ("... 8192 bytes smem" -> 8192).
bool NumberBefore(absl::string_view line, absl::string_view unit, int64_t* out) {
  size_t pos = line.find(unit);
  if (pos == absl::string_view::npos) return false;
  size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t start = end;
  while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9') --start;
  if (start == end) return false;
  *out = std::strtoll(std::string(line.substr(start, end - start)).c_str(), nullptr, 10);
  return true;
}

// 'Compiling entry function '_Z3fooPf' for 'sm_90a'' -> _Z3fooPf.
std::string QuotedName(absl::string_view line, absl::string_view after) {
  size_t pos = line.find(after);
  if (pos == absl::string_view::npos) return "";
  line.remove_prefix(pos + after.size());
  size_t end = line.find('\'');
  return std::string(line.substr(0, end));
}

}  // namespace

std::vector<v1::KernelUsage> ParsePtxasReport(absl::string_view output) {
  std::vector<v1::KernelUsage> kernels;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.find("Compiling entry function '") != absl::string_view::npos) {
      kernels.emplace_back().set_kernel(QuotedName(line, "entry function '"));
      continue;
    }
    if (kernels.empty()) continue;
    v1::KernelUsage& k = kernels.back();
    int64_t v = 0;
    if (line.find("bytes stack frame") != absl::string_view::npos) {
      if (NumberBefore(line, "bytes stack frame", &v)) k.set_stack_frame_bytes(v);
      if (NumberBefore(line, "bytes spill stores", &v)) k.set_spill_store_bytes(v);
      if (NumberBefore(line, "bytes spill loads", &v)) k.set_spill_load_bytes(v);
    } else if (line.find("Used ") != absl::string_view::npos &&
               line.find("registers") != absl::string_view::npos) {
      if (NumberBefore(line, "registers", &v)) k.set_registers(static_cast<int32_t>(v));
      if (NumberBefore(line, "bytes smem", &v)) k.set_shared_bytes(v);
      if (NumberBefore(line, "bytes cmem[0]", &v)) k.set_constant_bytes(v);
    }
  }
  return kernels;
}

}  // namespace anvil
