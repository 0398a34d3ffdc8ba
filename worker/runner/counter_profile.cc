// CUPTI range profiler (cupti_range_profiler.h) with the profiler host API
// (cupti_profiler_host.h) for the metric configuration and evaluation:
//   1. chip name and counter availability of the current context;
//   2. host object: which requested metrics the chip has, the config image
//      that schedules their counters, and how many passes it needs;
//   3. range profiler on the context: one user range ("gemm") around the call,
//      user replay until every pass is submitted;
//   4. decode the counter data and evaluate the metrics for range 0.
#include "worker/runner/counter_profile.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/runner/cuda_util.h"
#include "worker/runner/cupti_util.h"

namespace anvil::runner {
namespace {

// A CUPTI parameter struct, zeroed, with its size set.
template <typename T>
T Params(size_t struct_size) {
  T p{};
  p.structSize = struct_size;
  return p;
}
#define ANVIL_CUPTI_PARAMS(T) Params<T>(T##_STRUCT_SIZE)

#define ANVIL_CUPTI(expr, what)                                              \
  do {                                                                       \
    if (absl::Status _st = CuptiStatus((expr), what); !_st.ok()) return _st; \
  } while (0)

// The profiler host object, deinitialised on every exit path.
class HostObject {
 public:
  ~HostObject() {
    if (obj_ == nullptr) return;
    auto p = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    p.pHostObject = obj_;
    cuptiProfilerHostDeinitialize(&p);
  }
  absl::Status Init(const char* chip, const std::vector<uint8_t>& availability) {
    auto p = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip;
    p.pCounterAvailabilityImage = availability.data();
    ANVIL_CUPTI(cuptiProfilerHostInitialize(&p), "profiler host initialise");
    obj_ = p.pHostObject;
    return absl::OkStatus();
  }
  bool Knows(const std::string& metric) const {
    auto p = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    p.pHostObject = obj_;
    p.pMetricName = metric.c_str();
    return cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS;
  }
  CUpti_Profiler_Host_Object* get() const { return obj_; }

 private:
  CUpti_Profiler_Host_Object* obj_ = nullptr;
};

// Range profiling enabled on a context, disabled on every exit path.
class RangeProfiler {
 public:
  ~RangeProfiler() {
    if (obj_ == nullptr) return;
    auto p = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
    p.pRangeProfilerObject = obj_;
    cuptiRangeProfilerDisable(&p);
  }
  absl::Status Enable(CUcontext ctx) {
    auto p = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
    p.ctx = ctx;
    ANVIL_CUPTI(cuptiRangeProfilerEnable(&p), "range profiler enable");
    obj_ = p.pRangeProfilerObject;
    return absl::OkStatus();
  }
  CUpti_RangeProfiler_Object* get() const { return obj_; }

 private:
  CUpti_RangeProfiler_Object* obj_ = nullptr;
};

absl::Status InitializeProfilerOnce() {
  static const CUptiResult r = [] {
    auto p = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    return cuptiProfilerInitialize(&p);
  }();
  return CuptiStatus(r, "profiler initialise");
}

// Step 2: the config image scheduling the counters of `names`; *passes is how
// many replays it needs.
absl::StatusOr<std::vector<uint8_t>> ConfigImage(const HostObject& host,
                                                 std::vector<const char*>& names, size_t* passes) {
  auto add = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = host.get();
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  ANVIL_CUPTI(cuptiProfilerHostConfigAddMetrics(&add), "add metrics");
  auto size = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  size.pHostObject = host.get();
  ANVIL_CUPTI(cuptiProfilerHostGetConfigImageSize(&size), "config image size");
  std::vector<uint8_t> config(size.configImageSize);
  auto image = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
  image.pHostObject = host.get();
  image.configImageSize = config.size();
  image.pConfigImage = config.data();
  ANVIL_CUPTI(cuptiProfilerHostGetConfigImage(&image), "config image");
  auto n = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  n.configImageSize = config.size();
  n.pConfigImage = config.data();
  ANVIL_CUPTI(cuptiProfilerHostGetNumOfPasses(&n), "number of passes");
  *passes = n.numOfPasses;
  return config;
}

// Step 3, set-up: a counter data image for one range of `names`, and the
// profiler configured for one user range, user replay.
absl::StatusOr<std::vector<uint8_t>> Configure(const RangeProfiler& rp,
                                               std::vector<const char*>& names,
                                               std::vector<uint8_t>& config) {
  auto size = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  size.pRangeProfilerObject = rp.get();
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = 1;
  size.maxNumRangeTreeNodes = 1;
  ANVIL_CUPTI(cuptiRangeProfilerGetCounterDataSize(&size), "counter data size");
  std::vector<uint8_t> data(size.counterDataSize);
  auto init = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  init.pRangeProfilerObject = rp.get();
  init.counterDataSize = data.size();
  init.pCounterData = data.data();
  ANVIL_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&init), "counter data image");
  auto set = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  set.pRangeProfilerObject = rp.get();
  set.configSize = config.size();
  set.pConfig = config.data();
  set.counterDataImageSize = data.size();
  set.pCounterDataImage = data.data();
  set.range = CUPTI_UserRange;
  set.replayMode = CUPTI_UserReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  ANVIL_CUPTI(cuptiRangeProfilerSetConfig(&set), "set config");
  return data;
}

// Step 3: one pass, `before` outside the range, then the call inside the range
// "gemm"; *done once every pass is submitted.
absl::Status ReplayOnce(const RangeProfiler& rp, const std::function<absl::Status()>& before,
                        const std::function<absl::Status()>& call, bool* done) {
  ANVIL_RETURN_IF_ERROR(before());
  auto start = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
  start.pRangeProfilerObject = rp.get();
  ANVIL_CUPTI(cuptiRangeProfilerStart(&start), "start");
  auto push = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params);
  push.pRangeProfilerObject = rp.get();
  push.pRangeName = "gemm";
  ANVIL_CUPTI(cuptiRangeProfilerPushRange(&push), "push range");
  const absl::Status st = call();
  auto pop = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params);
  pop.pRangeProfilerObject = rp.get();
  ANVIL_CUPTI(cuptiRangeProfilerPopRange(&pop), "pop range");
  auto stop = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
  stop.pRangeProfilerObject = rp.get();
  ANVIL_CUPTI(cuptiRangeProfilerStop(&stop), "stop");
  *done = stop.isAllPassSubmitted != 0;
  return st;
}

// Step 4: decode the passes, then the metric values of range 0.
absl::StatusOr<std::vector<double>> Evaluate(const HostObject& host, const RangeProfiler& rp,
                                             std::vector<uint8_t>& data,
                                             std::vector<const char*>& names) {
  auto decode = ANVIL_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  decode.pRangeProfilerObject = rp.get();
  ANVIL_CUPTI(cuptiRangeProfilerDecodeData(&decode), "decode");
  if (decode.numOfRangeDropped != 0)
    return absl::InternalError("the profiler dropped the call's range");
  std::vector<double> values(names.size(), 0.0);
  auto eval = ANVIL_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
  eval.pHostObject = host.get();
  eval.pCounterDataImage = data.data();
  eval.counterDataImageSize = data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = names.data();
  eval.numMetrics = names.size();
  eval.pMetricValues = values.data();
  ANVIL_CUPTI(cuptiProfilerHostEvaluateToGpuValues(&eval), "evaluate");
  return values;
}

}  // namespace

const std::vector<std::string>& ProfileMetrics() {
  // The range spans more than the call's kernels (profiler set-up inside the
  // range), so durations and "elapsed" percentages are the range's; the SMs'
  // active cycles and the per-active-cycle percentages are the kernels'.
  static const std::vector<std::string>* m = new std::vector<std::string>{
      "gpu__time_duration.sum",                                     // ns, the range
      "gpc__cycles_elapsed.max",                                    // cycles, the range
      "sm__cycles_active.max",                                      // busiest SM
      "sm__cycles_active.avg",                                      // average SM
      "sm__ctas_launched.sum",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",  // tensor pipe
      "sm__warps_active.avg.pct_of_peak_sustained_active",               // occupancy
      "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",    // global/L2 waits
      "smsp__warp_issue_stalled_barrier_per_warp_active.pct",            // bar.sync
      "smsp__warp_issue_stalled_gmma_per_warp_active.pct",               // wgmma
      "smsp__warp_issue_stalled_sleeping_per_warp_active.pct",           // nanosleep
      "lts__t_bytes.sum",                                           // L2 traffic
      "lts__t_sector_hit_rate.pct",                                 // L2 hit rate
      "l1tex__m_xbar2l1tex_read_bytes.sum",                         // L2 -> SM
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
  };
  return *m;
}

absl::StatusOr<CounterProfile> ProfileCall(const std::vector<std::string>& metrics,
                                           const std::function<absl::Status()>& before,
                                           const std::function<absl::Status()>& call) {
  ANVIL_RETURN_IF_ERROR(InitializeProfilerOnce());
  absl::StatusOr<CUcontext> ctx = CurrentContext();
  if (!ctx.ok()) return ctx.status();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return absl::InternalError("cudaGetDevice failed");

  auto chip = ANVIL_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  chip.deviceIndex = static_cast<size_t>(device);
  ANVIL_CUPTI(cuptiDeviceGetChipName(&chip), "chip name");

  auto avail = ANVIL_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  avail.ctx = *ctx;
  ANVIL_CUPTI(cuptiProfilerGetCounterAvailability(&avail), "counter availability size");
  std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability.data();
  ANVIL_CUPTI(cuptiProfilerGetCounterAvailability(&avail), "counter availability");

  HostObject host;
  ANVIL_RETURN_IF_ERROR(host.Init(chip.pChipName, availability));
  CounterProfile out;
  std::vector<const char*> names;
  for (const std::string& m : metrics) {
    if (host.Knows(m)) {
      names.push_back(m.c_str());
    } else {
      out.unsupported.push_back(m);
    }
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "none of the metrics is known on ", chip.pChipName, ": ", absl::StrJoin(metrics, ", ")));
  }
  size_t passes = 0;
  absl::StatusOr<std::vector<uint8_t>> config = ConfigImage(host, names, &passes);
  if (!config.ok()) return config.status();

  RangeProfiler rp;
  ANVIL_RETURN_IF_ERROR(rp.Enable(*ctx));
  absl::StatusOr<std::vector<uint8_t>> data = Configure(rp, names, *config);
  if (!data.ok()) return data.status();
  // One replay of the call per pass; a bound in case the profiler never says done.
  bool done = false;
  while (!done) {
    if (static_cast<size_t>(out.passes) > passes + 1) {
      return absl::InternalError(absl::StrCat("the profiler wanted more than ", out.passes,
                                              " replays for ", passes, " passes"));
    }
    ANVIL_RETURN_IF_ERROR(ReplayOnce(rp, before, call, &done));
    ++out.passes;
  }
  absl::StatusOr<std::vector<double>> values = Evaluate(host, rp, *data, names);
  if (!values.ok()) return values.status();
  for (size_t i = 0; i < names.size(); ++i) out.values[names[i]] = (*values)[i];
  return out;
}

}  // namespace anvil::runner
