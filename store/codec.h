// Internal to store/: how proto values become column values and back. Enums
// are stored as lower-case text without their prefix ("passed", "queued",
// "nt"), maps and lists as JSON, timing samples as little-endian float64
// blobs. Column lists shared by several statements live here too.
//
// Thread-safety: pure functions.
#ifndef ANVIL_STORE_CODEC_H_
#define ANVIL_STORE_CODEC_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "anvil/v1/kernel_search.pb.h"
#include "anvil/v1/types.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_field.h"
#include "store/sqlite.h"

namespace anvil::store_internal {

// ---- enums ----
std::string VerdictText(v1::Verdict verdict);
v1::Verdict VerdictFromText(absl::string_view text);
std::string JobStateText(v1::JobState state);
v1::JobState JobStateFromText(absl::string_view text);
std::string LayoutText(v1::Layout layout);  // "nt", "nn", "" when unspecified
v1::Layout LayoutFromText(absl::string_view text);
std::string DtypeText(v1::Dtype dtype);  // "f16_f32acc"
v1::Dtype DtypeFromText(absl::string_view text);

// "device" -> "device_median_us"; InvalidArgument for other names.
absl::StatusOr<std::string> FigureColumn(absl::string_view figure);

// ---- JSON ----
std::string StringMapJson(const google::protobuf::Map<std::string, std::string>& map);
absl::Status ParseStringMapJson(absl::string_view json,
                                google::protobuf::Map<std::string, std::string>* map);
std::string DoubleMapJson(const google::protobuf::Map<std::string, double>& map);
absl::Status ParseDoubleMapJson(absl::string_view json,
                                google::protobuf::Map<std::string, double>* map);
std::string StringListJson(const google::protobuf::RepeatedPtrField<std::string>& list);
absl::Status ParseStringListJson(absl::string_view json,
                                 google::protobuf::RepeatedPtrField<std::string>* list);
// Proto messages in proto3 JSON with the .proto field names.
absl::StatusOr<std::string> MessageJson(const google::protobuf::Message& message);
absl::Status ParseMessageJson(absl::string_view json, google::protobuf::Message* message);
template <typename M>
absl::StatusOr<std::string> MessageListJson(const google::protobuf::RepeatedPtrField<M>& list) {
  std::string out = "[";
  for (const M& message : list) {
    STORE_ASSIGN_OR_RETURN(std::string json, MessageJson(message));
    if (out.size() > 1) out += ",";
    out += json;
  }
  return out + "]";
}
// Calls add() for each element and parses the element into what it returns.
absl::Status ParseMessageListJson(absl::string_view json,
                                  const std::function<google::protobuf::Message*()>& add);

// ---- samples ----
std::string SamplesBlob(const google::protobuf::RepeatedField<double>& samples);
absl::Status ParseSamplesBlob(absl::string_view blob, google::protobuf::RepeatedField<double>* out);

// ---- shared column groups ----
// The 34 columns of a Timings (5 per figure for six figures, first_call_us,
// then the graph replays' call and set counts), each name prefixed with
// `prefix` (e.g. "m.").
std::string TimingColumns(absl::string_view prefix);
inline constexpr int kTimingColumnCount = 34;
// Binds the 34 timing values; a figure that is absent binds NULLs.
void BindTimings(Stmt& stmt, bool present, const v1::Timings& timings);
// Reads the 34 columns starting at col; returns the next column.
int ReadTimings(const Stmt& stmt, int col, v1::Timings* timings, bool* present);
// Samples columns, one blob per figure.
inline constexpr char kSampleColumns[] =
    "device_us, cold_us, warm_us, call_us, graph_hot_us, graph_cold_us";
bool HasSamples(const v1::Timings& timings);
void BindSamples(Stmt& stmt, const v1::Timings& timings);
absl::Status ReadSamples(const Stmt& stmt, int col, v1::Timings* timings);

// Problem key columns: "gpu, arch, m, n, k, layout, dtype" (with prefix).
std::string ProblemColumns(absl::string_view prefix);
void BindProblem(Stmt& stmt, const v1::Problem& problem);
int ReadProblem(const Stmt& stmt, int col, v1::Problem* problem);

}  // namespace anvil::store_internal

#endif  // ANVIL_STORE_CODEC_H_
