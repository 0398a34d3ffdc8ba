// Internal to report/: timing regimes read from v1::Timings by reflection,
// so a regime added to the proto (e.g. the CUDA-graph ones) needs no change
// here. Pure functions; thread-safe.
#ifndef ANVIL_REPORT_REGIMES_H_
#define ANVIL_REPORT_REGIMES_H_

#include <string>

#include "anvil/v1/types.pb.h"

namespace anvil::report {

// The stats of `regime` ("graph-cold", "device", ...) in t; nullptr when
// Timings has no such regime.
const v1::TimingStats* RegimeStats(const v1::Timings& t, const std::string& regime);

// Median of the regime in t, 0 when absent or not measured.
double RegimeUs(const v1::Timings& t, const std::string& regime);

// The fastest baseline of m in the regime (median), 0 when none has it;
// `name` (optional) receives its name and `spread` (optional) its spread.
double BestBaselineUs(const v1::Measurement& m, const std::string& regime,
                      std::string* name = nullptr, double* spread = nullptr);

// 2*M*N*K and the bytes of A, B and C (fp16), as the runner's speed of light counts them.
double ProblemFlops(const v1::Problem& p);
double ProblemBytes(const v1::Problem& p);

}  // namespace anvil::report

#endif  // ANVIL_REPORT_REGIMES_H_
