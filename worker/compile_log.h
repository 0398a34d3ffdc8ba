// Turns nvcc's output into what a person or an LLM needs to fix a candidate:
// the error lines with a little context, scratch paths replaced by the
// candidate's name, duplicates folded, capped in size. Pure; thread-safe.
#ifndef ANVIL_WORKER_COMPILE_LOG_H_
#define ANVIL_WORKER_COMPILE_LOG_H_

#include <string>

#include "absl/strings/string_view.h"

namespace anvil {

// `scratch_dir` is replaced by nothing so "<dir>/candidate.cu(12): error"
// reads "candidate.cu(12): error". At most max_lines lines and max_bytes.
std::string TrimCompileLog(absl::string_view output, absl::string_view scratch_dir,
                           int max_lines = 40, size_t max_bytes = 4096);

}  // namespace anvil

#endif  // ANVIL_WORKER_COMPILE_LOG_H_
