// Helpers for the problem key (gpu, M, N, K, layout, dtype): parsing the
// forms people type ("4096x4096x4096", "nt"), shape files, and stable names.
// Pure functions; thread-safe.
#ifndef ANVIL_PROTO_PROBLEM_H_
#define ANVIL_PROTO_PROBLEM_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/kernel_search.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// Largest accepted M, N or K: the candidate ABI passes them as int.
inline constexpr int64_t kMaxDim = 2147483647;
// The operands A, B and C together (fp16) must fit this: a runner holds them
// with their reference on one GPU (80 GiB on an H100), so a problem past it
// can never be measured and is refused up front.
inline constexpr int64_t kMaxOperandBytes = int64_t(32) << 30;

v1::Shape MakeShape(int64_t m, int64_t n, int64_t k);

// Parses "MxNxK" (decimal, each in [1, kMaxDim]).
absl::StatusOr<v1::Shape> ParseShape(absl::string_view text);

// Parses "nt" or "nn" (case-insensitive).
absl::StatusOr<v1::Layout> ParseLayout(absl::string_view text);

// "nt", "nn" or "?".
absl::string_view LayoutName(v1::Layout layout);

// "MxNxK".
std::string ShapeName(const v1::Shape& shape);

// "MxNxK_nt": a problem's name within one GPU.
std::string ProblemName(const v1::Problem& problem);

// OK when every dimension is in range and layout and dtype are set.
absl::Status ValidateProblem(const v1::Problem& problem);
// A job's budget: every limit a finite number >= 0 (0: the default), so
// that NaN or infinity never reaches a comparison. InvalidArgument names the
// field.
absl::Status CheckBudget(const v1::Budget& budget);

// One line of a shapes file: "M N K layout".
struct ShapeSpec {
  v1::Shape shape;
  v1::Layout layout = v1::LAYOUT_UNSPECIFIED;
};

// Parses a shapes file: one "M N K layout" per line, '#' starts a comment,
// blank lines ignored. Errors name the offending line number.
absl::StatusOr<std::vector<ShapeSpec>> ParseShapesFile(absl::string_view text);

// Builds a problem key with dtype f16_f32acc.
v1::Problem MakeProblem(std::string gpu, std::string arch, const v1::Shape& shape,
                        v1::Layout layout);

}  // namespace anvil

#endif  // ANVIL_PROTO_PROBLEM_H_
