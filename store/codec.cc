#include "store/codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "proto/figures.h"

namespace anvil::store_internal {
namespace {

using nlohmann::json;
namespace pb = google::protobuf;

// The timing figures in the order of their column groups (proto/figures.h
// maps each to its field of v1::Timings); a group's columns are named by the
// figure with '_' for '-' ("graph_cold_median_us").
constexpr absl::string_view kColumnFigures[] = {"device", "cold",      "warm",
                                                "call",   "graph-hot", "graph-cold"};
constexpr int kFigureCount = 6;

std::string ColumnStem(absl::string_view figure) {
  std::string stem(figure);
  std::replace(stem.begin(), stem.end(), '-', '_');
  return stem;
}

// VERDICT_COMPILE_ERROR -> "compile_error"; unknown numbers as decimal text.
std::string EnumText(const pb::EnumDescriptor* descriptor, int number, absl::string_view prefix) {
  const pb::EnumValueDescriptor* value = descriptor->FindValueByNumber(number);
  if (value == nullptr) return absl::StrCat(number);
  absl::string_view name = value->name();
  if (absl::StartsWith(name, prefix)) name.remove_prefix(prefix.size());
  return absl::AsciiStrToLower(name);
}

int EnumFromText(const pb::EnumDescriptor* descriptor, absl::string_view text,
                 absl::string_view prefix) {
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) return number;
  const pb::EnumValueDescriptor* value =
      descriptor->FindValueByName(absl::StrCat(prefix, absl::AsciiStrToUpper(text)));
  return value == nullptr ? 0 : value->number();
}

absl::Status BadJson(absl::string_view what, absl::string_view text) {
  return absl::DataLossError(
      absl::StrCat("stored ", what, " is not valid JSON: ", text.substr(0, 80)));
}

}  // namespace

std::string VerdictText(v1::Verdict verdict) {
  return EnumText(v1::Verdict_descriptor(), verdict, "VERDICT_");
}
v1::Verdict VerdictFromText(absl::string_view text) {
  return static_cast<v1::Verdict>(EnumFromText(v1::Verdict_descriptor(), text, "VERDICT_"));
}
std::string JobStateText(v1::JobState state) {
  return EnumText(v1::JobState_descriptor(), state, "JOB_STATE_");
}
v1::JobState JobStateFromText(absl::string_view text) {
  return static_cast<v1::JobState>(EnumFromText(v1::JobState_descriptor(), text, "JOB_STATE_"));
}
std::string LayoutText(v1::Layout layout) {
  return layout == v1::LAYOUT_UNSPECIFIED ? ""
                                          : EnumText(v1::Layout_descriptor(), layout, "LAYOUT_");
}
v1::Layout LayoutFromText(absl::string_view text) {
  return static_cast<v1::Layout>(EnumFromText(v1::Layout_descriptor(), text, "LAYOUT_"));
}
std::string DtypeText(v1::Dtype dtype) {
  return dtype == v1::DTYPE_UNSPECIFIED ? "" : EnumText(v1::Dtype_descriptor(), dtype, "DTYPE_");
}
v1::Dtype DtypeFromText(absl::string_view text) {
  return static_cast<v1::Dtype>(EnumFromText(v1::Dtype_descriptor(), text, "DTYPE_"));
}

absl::StatusOr<std::string> FigureColumn(absl::string_view figure) {
  const std::string stem = ColumnStem(figure);
  for (absl::string_view known : kColumnFigures) {
    if (stem == ColumnStem(known)) return absl::StrCat(stem, "_median_us");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "timing figure '", figure, "' must be one of ", FigureList()));
}

// ---- JSON ----

std::string StringMapJson(const pb::Map<std::string, std::string>& map) {
  json object = json::object();
  for (const auto& [key, value] : map) object[key] = value;
  return object.dump();
}

absl::Status ParseStringMapJson(absl::string_view text, pb::Map<std::string, std::string>* map) {
  json object = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return BadJson("string map", text);
  for (const auto& [key, value] : object.items()) {
    if (!value.is_string()) return BadJson("string map", text);
    (*map)[key] = value.get_ref<const std::string&>();
  }
  return absl::OkStatus();
}

std::string DoubleMapJson(const pb::Map<std::string, double>& map) {
  json object = json::object();
  for (const auto& [key, value] : map) object[key] = value;  // NaN/Inf become null
  return object.dump();
}

absl::Status ParseDoubleMapJson(absl::string_view text, pb::Map<std::string, double>* map) {
  json object = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return BadJson("number map", text);
  for (const auto& [key, value] : object.items()) {
    if (value.is_number()) {
      (*map)[key] = value.get<double>();
    } else if (value.is_null()) {
      (*map)[key] = std::numeric_limits<double>::quiet_NaN();
    } else {
      return BadJson("number map", text);
    }
  }
  return absl::OkStatus();
}

std::string StringListJson(const pb::RepeatedPtrField<std::string>& list) {
  json array = json::array();
  for (const std::string& item : list) array.push_back(item);
  return array.dump();
}

absl::Status ParseStringListJson(absl::string_view text, pb::RepeatedPtrField<std::string>* list) {
  json array = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) return BadJson("string list", text);
  for (const json& item : array) {
    if (!item.is_string()) return BadJson("string list", text);
    list->Add(std::string(item.get_ref<const std::string&>()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MessageJson(const pb::Message& message) {
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto status = pb::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot encode ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  return out;
}

absl::Status ParseMessageJson(absl::string_view text, pb::Message* message) {
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // rows written by a newer Anvil
  auto status = pb::util::JsonStringToMessage(std::string(text), message, options);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored ", message->GetTypeName(), " is not valid: ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::Status ParseMessageListJson(absl::string_view text,
                                  const std::function<pb::Message*()>& add) {
  json array = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) return BadJson("message list", text);
  for (const json& item : array) STORE_RETURN_IF_ERROR(ParseMessageJson(item.dump(), add()));
  return absl::OkStatus();
}

// ---- samples ----

static_assert(std::endian::native == std::endian::little,
              "sample blobs are little-endian float64; add a byte swap for this target");

std::string SamplesBlob(const pb::RepeatedField<double>& samples) {
  std::string blob(samples.size() * sizeof(double), '\0');
  if (!samples.empty()) std::memcpy(blob.data(), samples.data(), blob.size());
  return blob;
}

absl::Status ParseSamplesBlob(absl::string_view blob, pb::RepeatedField<double>* out) {
  if (blob.size() % sizeof(double) != 0) {
    return absl::DataLossError(
        absl::StrCat("sample blob of ", blob.size(), " bytes is not a whole number of float64"));
  }
  int count = static_cast<int>(blob.size() / sizeof(double));
  out->Resize(count, 0.0);
  if (count > 0) std::memcpy(out->mutable_data(), blob.data(), blob.size());
  return absl::OkStatus();
}

// ---- column groups ----

namespace {

const v1::TimingStats& Figure(const v1::Timings& t, int i) {
  bool has = false;
  return *FigureField(t, kColumnFigures[i], &has);
}

bool HasFigure(const v1::Timings& t, int i) {
  bool has = false;
  FigureField(t, kColumnFigures[i], &has);
  return has;
}

v1::TimingStats* MutableFigure(v1::Timings* t, int i) {
  return MutableFigureStats(t, kColumnFigures[i]);
}

}  // namespace

std::string TimingColumns(absl::string_view prefix) {
  std::string out;
  for (absl::string_view figure : kColumnFigures) {
    const std::string f = ColumnStem(figure);
    absl::StrAppend(&out, prefix, f, "_median_us, ", prefix, f, "_min_us, ", prefix, f, "_p90_us, ",
                    prefix, f, "_spread, ", prefix, f, "_samples, ");
  }
  absl::StrAppend(&out, prefix, "first_call_us, ", prefix, "graph_calls_hot, ", prefix,
                  "graph_calls_cold, ", prefix, "graph_cold_sets");
  return out;
}

void BindTimings(Stmt& stmt, bool present, const v1::Timings& timings) {
  for (int i = 0; i < kFigureCount; ++i) {
    if (present && HasFigure(timings, i)) {
      const v1::TimingStats& s = Figure(timings, i);
      stmt.BindReal(s.median_us()).BindReal(s.min_us()).BindReal(s.p90_us());
      stmt.BindReal(s.spread()).BindInt(s.samples());
    } else {
      stmt.BindNull().BindNull().BindNull().BindNull().BindNull();
    }
  }
  if (present) {
    stmt.BindReal(timings.first_call_us());
  } else {
    stmt.BindNull();
  }
  for (int32_t v : {timings.graph_calls_hot(), timings.graph_calls_cold(), timings.graph_cold_sets()}) {
    if (present && v > 0) {
      stmt.BindInt(v);
    } else {
      stmt.BindNull();
    }
  }
}

int ReadTimings(const Stmt& stmt, int col, v1::Timings* timings, bool* present) {
  *present = false;
  for (int i = 0; i < kFigureCount; ++i, col += 5) {
    if (stmt.IsNull(col)) continue;
    v1::TimingStats* s = MutableFigure(timings, i);
    s->set_median_us(stmt.Real(col));
    s->set_min_us(stmt.Real(col + 1));
    s->set_p90_us(stmt.Real(col + 2));
    s->set_spread(stmt.Real(col + 3));
    s->set_samples(static_cast<int32_t>(stmt.Int(col + 4)));
    *present = true;
  }
  if (!stmt.IsNull(col)) {
    timings->set_first_call_us(stmt.Real(col));
    *present = true;
  }
  if (!stmt.IsNull(col + 1)) timings->set_graph_calls_hot(static_cast<int32_t>(stmt.Int(col + 1)));
  if (!stmt.IsNull(col + 2)) timings->set_graph_calls_cold(static_cast<int32_t>(stmt.Int(col + 2)));
  if (!stmt.IsNull(col + 3)) timings->set_graph_cold_sets(static_cast<int32_t>(stmt.Int(col + 3)));
  return col + 4;
}

bool HasSamples(const v1::Timings& timings) {
  for (int i = 0; i < kFigureCount; ++i) {
    if (Figure(timings, i).sample_us_size() > 0) return true;
  }
  return false;
}

void BindSamples(Stmt& stmt, const v1::Timings& timings) {
  for (int i = 0; i < kFigureCount; ++i) {
    const v1::TimingStats& s = Figure(timings, i);
    if (s.sample_us_size() > 0) {
      stmt.BindBlob(SamplesBlob(s.sample_us()));
    } else {
      stmt.BindNull();
    }
  }
}

absl::Status ReadSamples(const Stmt& stmt, int col, v1::Timings* timings) {
  for (int i = 0; i < kFigureCount; ++i) {
    if (stmt.IsNull(col + i)) continue;
    v1::TimingStats* s = MutableFigure(timings, i);
    s->clear_sample_us();
    STORE_RETURN_IF_ERROR(ParseSamplesBlob(stmt.Blob(col + i), s->mutable_sample_us()));
  }
  return absl::OkStatus();
}

std::string ProblemColumns(absl::string_view prefix) {
  return absl::StrCat(prefix, "gpu, ", prefix, "arch, ", prefix, "m, ", prefix, "n, ", prefix,
                      "k, ", prefix, "layout, ", prefix, "dtype");
}

void BindProblem(Stmt& stmt, const v1::Problem& problem) {
  stmt.BindText(problem.gpu()).BindText(problem.arch());
  stmt.BindInt(problem.shape().m()).BindInt(problem.shape().n()).BindInt(problem.shape().k());
  stmt.BindText(LayoutText(problem.layout())).BindText(DtypeText(problem.dtype()));
}

int ReadProblem(const Stmt& stmt, int col, v1::Problem* problem) {
  problem->set_gpu(stmt.Text(col));
  problem->set_arch(stmt.Text(col + 1));
  problem->mutable_shape()->set_m(stmt.Int(col + 2));
  problem->mutable_shape()->set_n(stmt.Int(col + 3));
  problem->mutable_shape()->set_k(stmt.Int(col + 4));
  problem->set_layout(LayoutFromText(stmt.Text(col + 5)));
  problem->set_dtype(DtypeFromText(stmt.Text(col + 6)));
  return col + 7;
}

}  // namespace anvil::store_internal
