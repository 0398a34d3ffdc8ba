#include "proto/problem.h"

#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil {
namespace {

absl::StatusOr<int64_t> ParseDim(absl::string_view text, absl::string_view what) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", text, "' is not a whole number"));
  }
  if (value < 1 || value > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be between 1 and ", kMaxDim, ", got ", value));
  }
  return value;
}

}  // namespace

v1::Shape MakeShape(int64_t m, int64_t n, int64_t k) {
  v1::Shape shape;
  shape.set_m(m);
  shape.set_n(n);
  shape.set_k(k);
  return shape;
}

absl::StatusOr<v1::Shape> ParseShape(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::ByAnyChar("xX"));
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", text, "' must be MxNxK, e.g. 4096x4096x4096"));
  }
  absl::StatusOr<int64_t> m = ParseDim(parts[0], "M");
  if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("shape '", text, "': ", m.status().message()));
  absl::StatusOr<int64_t> n = ParseDim(parts[1], "N");
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat("shape '", text, "': ", n.status().message()));
  absl::StatusOr<int64_t> k = ParseDim(parts[2], "K");
  if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat("shape '", text, "': ", k.status().message()));
  return MakeShape(*m, *n, *k);
}

absl::StatusOr<v1::Layout> ParseLayout(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "nt") return v1::LAYOUT_NT;
  if (lower == "nn") return v1::LAYOUT_NN;
  return absl::InvalidArgumentError(
      absl::StrCat("layout '", text, "' must be nt (C = A*B^T) or nn (C = A*B)"));
}

absl::string_view LayoutName(v1::Layout layout) {
  switch (layout) {
    case v1::LAYOUT_NT: return "nt";
    case v1::LAYOUT_NN: return "nn";
    default: return "?";
  }
}

std::string ShapeName(const v1::Shape& shape) {
  return absl::StrCat(shape.m(), "x", shape.n(), "x", shape.k());
}

std::string ProblemName(const v1::Problem& problem) {
  return absl::StrCat(ShapeName(problem.shape()), "_", LayoutName(problem.layout()));
}

absl::Status ValidateProblem(const v1::Problem& problem) {
  const v1::Shape& s = problem.shape();
  for (int64_t d : {s.m(), s.n(), s.k()}) {
    if (d < 1 || d > kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("problem ", ShapeName(s), ": every dimension must be in [1, ", kMaxDim, "]"));
    }
  }
  const double bytes = 2.0 * (double(s.m()) * double(s.k()) + double(s.n()) * double(s.k()) +
                              double(s.m()) * double(s.n()));
  if (bytes > double(kMaxOperandBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "problem ", ShapeName(s), ": its operands take ", absl::SixDigits(bytes / double(1LL << 30)),
        " GiB; a problem's A, B and C must fit in ", kMaxOperandBytes >> 30, " GiB to be measured on one GPU"));
  }
  if (problem.layout() != v1::LAYOUT_NT && problem.layout() != v1::LAYOUT_NN) {
    return absl::InvalidArgumentError("problem layout must be nt or nn");
  }
  if (problem.dtype() != v1::DTYPE_F16_F32ACC) {
    return absl::InvalidArgumentError("problem dtype must be f16_f32acc");
  }
  return absl::OkStatus();
}

absl::Status CheckBudget(const v1::Budget& b) {
  const std::pair<const char*, double> limits[] = {
      {"max_wall_seconds", b.max_wall_seconds()}, {"max_gpu_seconds", b.max_gpu_seconds()},
      {"plateau_candidates", b.plateau_candidates()}, {"target_efficiency", b.target_efficiency()},
      {"max_candidates", static_cast<double>(b.max_candidates())}};
  for (const auto& [name, value] : limits) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("budget.", name, " must be a finite number >= 0 (0: the default), not ", value));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ShapeSpec>> ParseShapesFile(absl::string_view text) {
  std::vector<ShapeSpec> specs;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected 'M N K layout', got '", line, "'"));
    }
    absl::StatusOr<v1::Shape> shape =
        ParseShape(absl::StrCat(fields[0], "x", fields[1], "x", fields[2]));
    if (!shape.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": ", shape.status().message()));
    }
    absl::StatusOr<v1::Layout> layout = ParseLayout(fields[3]);
    if (!layout.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": ", layout.status().message()));
    }
    specs.push_back({*shape, *layout});
  }
  return specs;
}

v1::Problem MakeProblem(std::string gpu, std::string arch, const v1::Shape& shape,
                        v1::Layout layout) {
  v1::Problem p;
  p.set_gpu(std::move(gpu));
  p.set_arch(std::move(arch));
  *p.mutable_shape() = shape;
  p.set_layout(layout);
  p.set_dtype(v1::DTYPE_F16_F32ACC);
  return p;
}

}  // namespace anvil
