#include "tools/soak/overhead.h"

#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"
#include "spdlog/spdlog.h"
#include "worker/builder.h"
#include "tools/soak/fixtures.h"
#include "tools/soak/jobs.h"

namespace anvil {
namespace {

// Milliseconds of one fresh build (same kernel and flags in both modes).
double BuildMs(const Builder& b, const OverheadInputs& in, int rep, const char* mode, std::string* note) {
  const absl::Time t0 = absl::Now();
  absl::StatusOr<v1::Build> r = b.Build(FreshNaiveCandidate(in.naive, 0, absl::StrCat(in.nonce, "-", mode, rep)));
  const double ms = SecondsSince(t0) * 1e3;
  if (!r.ok() || r->verdict() != v1::VERDICT_PASSED || r->cache_hit()) {
    *note = absl::StrCat("a ", mode, " build failed: ", r.ok() ? r->error() : r.status().ToString());
    return -1;
  }
  DropCacheEntry(*r);
  return ms;
}

void MeasureBuilds(const OverheadInputs& in, OverheadReport& out) {
  const Builder none(SoakBuilderOptions(in.toolchain, in.cache_dir, in.scratch_dir, 1, false));
  const Builder ns(SoakBuilderOptions(in.toolchain, in.cache_dir, in.scratch_dir, 1, true));
  // The first nvcc run reads the toolkit from disk: not counted. Then the two
  // modes alternate which goes first, so that drift does not favour one.
  BuildMs(ns, in, -1, "warm-up", &out.note);
  for (int rep = 0; rep < in.reps; ++rep) {
    for (bool isolated : {rep % 2 == 1, rep % 2 == 0}) {
      const double ms = BuildMs(isolated ? ns : none, in, rep, isolated ? "namespaces" : "none", &out.note);
      if (ms >= 0) (isolated ? out.build_ns_ms : out.build_none_ms).push_back(ms);
    }
  }
}

// One evaluation of the passing candidate; false (and a note) unless it PASSED.
bool EvalMs(RunnerHost& e, const OverheadInputs& in, std::vector<double>* wall, std::vector<double>* startup,
            std::string* note) {
  absl::StatusOr<RunnerResults> ev = e.Measure(*in.candidate, *in.build, {FixtureShape()}, in.known);
  if (!ev.ok() || ev->measurements.empty() || ev->measurements[0].verdict() != v1::VERDICT_PASSED) {
    *note = absl::StrCat("an evaluation failed: ", ev.ok() ? ev->measurements.at(0).detail() : ev.status().ToString());
    return false;
  }
  if (wall) wall->push_back(ev->seconds * 1e3);
  if (startup && ev->info) startup->push_back(ev->info->startup_seconds() * 1e3);
  return true;
}

void MeasureEvaluations(const OverheadInputs& in, OverheadReport& out) {
  RunnerHost none(in.eval_none);
  // A first run in each mode, not counted: the runner's files come from disk.
  if (!EvalMs(none, in, nullptr, nullptr, &out.note)) return;
  if (!EvalMs(*in.eval_namespaces, in, nullptr, nullptr, &out.note)) return;
  for (int rep = 0; rep < in.reps; ++rep) {
    for (bool isolated : {rep % 2 == 1, rep % 2 == 0}) {
      if (isolated) {
        EvalMs(*in.eval_namespaces, in, &out.eval_ns_ms, &out.startup_ns_ms, &out.note);
      } else {
        EvalMs(none, in, &out.eval_none_ms, &out.startup_none_ms, &out.note);
      }
    }
  }
}

}  // namespace

OverheadReport MeasureOverhead(const OverheadInputs& in) {
  OverheadReport out;
  out.reps = in.reps;
  if (in.reps <= 0) return out;
  const absl::Time t0 = absl::Now();
  MeasureBuilds(in, out);
  if (in.eval_namespaces != nullptr) MeasureEvaluations(in, out);
  if (const sandbox::Capabilities& caps = sandbox::Probe(); !caps.namespaces) {
    out.note = absl::StrCat("namespaces are refused on this node (", caps.why_not,
                            "): both columns ran without them. ", out.note);
  }
  spdlog::info("overhead: {} builds and runs per mode in {:.1f} s", in.reps, SecondsSince(t0));
  return out;
}

}  // namespace anvil
