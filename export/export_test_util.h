// Test helpers for the exporter's tests: a small store of winners whose
// candidates are real seed kernels, with verified re-measurements whose hot
// and cold figures the test chooses. Test code only; not thread-safe.
#ifndef ANVIL_EXPORT_EXPORT_TEST_UTIL_H_
#define ANVIL_EXPORT_EXPORT_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "export/select.h"
#include "proto/candidate.h"
#include "store/store_test_util.h"

namespace anvil::testing_util {

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A seed kernel (seeds/<dir>/kernel.cu) as a stored candidate.
inline v1::Candidate SeedCandidate(const std::string& dir, v1::Layout layout,
                                   std::map<std::string, std::string> params) {
  v1::Candidate c;
  const char* seeds = std::getenv("ANVIL_SEEDS_DIR");  // the bundle's, on a GPU node
  c.set_source(ReadText((seeds ? std::string(seeds) : std::string(ANVIL_SOURCE_DIR) + "/seeds") +
                        "/" + dir + "/kernel.cu"));
  for (const auto& [k, v] : params) (*c.mutable_params())[k] = v;
  c.set_proposer("seed");
  c.set_family(dir.substr(3));
  c.set_layout(layout);
  c.set_arch("sm_90a");
  AssignCandidateId(c);
  c.set_name(CandidateDisplayName(c));
  return c;
}

inline void SetRegime(v1::Timings* t, exporter::Regime r, double us, double spread) {
  v1::TimingStats* s = exporter::MutableRegimeStats(t, r);
  FillStats(us, 5, s);
  s->set_spread(spread);
}

// One verified re-measurement: the kernel and the three baselines in both
// regimes (baselines: cublas slowest, cublaslt_auto fastest at base_*).
inline v1::Measurement RegimeMeasurement(const v1::Candidate& c, const v1::Problem& p,
                                         double hot_us, double cold_us, double base_hot,
                                         double base_cold, int64_t at_ms,
                                         const std::string& versions) {
  v1::Measurement m = TestMeasurement(c.id(), p, cold_us);
  SetRegime(m.mutable_timings(), exporter::Regime::kHot, hot_us, 0.01);
  SetRegime(m.mutable_timings(), exporter::Regime::kCold, cold_us, 0.01);
  const double scale[] = {1.10, 1.03, 1.0};
  for (int i = 0; i < m.baselines_size(); ++i) {
    v1::Timings* t = m.mutable_baselines(i)->mutable_timings();
    SetRegime(t, exporter::Regime::kHot, base_hot * scale[i], 0.01);
    SetRegime(t, exporter::Regime::kCold, base_cold * scale[i], 0.01);
  }
  m.set_verified(true);
  m.set_measured_at_unix_ms(at_ms);
  m.set_versions(versions);
  return m;
}

}  // namespace anvil::testing_util

#endif  // ANVIL_EXPORT_EXPORT_TEST_UTIL_H_
