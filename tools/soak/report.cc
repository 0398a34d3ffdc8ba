#include "tools/soak/report.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace anvil {
namespace {

using nlohmann::json;

json SummaryJson(const std::vector<double>& v) {
  const Summary s = Summarize(v);
  return {{"n", s.n}, {"min", s.min}, {"median", s.median}, {"max", s.max}};
}

// "0.412 / 0.530 / 2.310" (min / median / max), "-" when empty.
std::string Triple(const std::vector<double>& v, int precision = 3, bool sign = false) {
  if (v.empty()) return "-";
  const Summary s = Summarize(v);
  auto f = [&](double x) { return sign ? absl::StrFormat("%+.*f", precision, x) : absl::StrFormat("%.*f", precision, x); };
  return absl::StrCat(f(s.min), " / ", f(s.median), " / ", f(s.max));
}

std::vector<double> Field(const std::vector<RecoverySample>& r, double RecoverySample::*f) {
  std::vector<double> out;
  for (const RecoverySample& s : r) out.push_back(s.*f);
  return out;
}

std::string Observed(const KindResult& k) {
  std::vector<std::string> parts;
  for (const auto& [what, n] : k.observed) parts.push_back(absl::StrCat(what, " x", n));
  return absl::StrJoin(parts, ", ");
}

std::string FormatJobs(const SoakReport& r) {
  std::string out = absl::StrFormat(
      "# anvil-soak: %d of %d jobs (%d builds, %d at once; %d passing and %d hostile evaluations) "
      "in %.1f s after %.1f s of set-up%s\n\n",
      r.jobs_done, r.mix.builds + r.mix.evals + r.mix.hostile, r.mix.builds, r.build_jobs, r.mix.evals,
      r.mix.hostile, r.soak_s, r.setup_s, r.stopped_early ? " (STOPPED at --max-seconds)" : "");
  if (!r.cpu_only) {
    absl::StrAppend(&out, "GPU: ", r.gpu, " ", r.gpu_uuid, " (", r.versions, ")\nRunner limits: ",
                    r.startup_timeout_s, " s start-up + ", r.problem_timeout_s, " s per problem\n");
  }
  absl::StrAppend(&out, "Sandbox: ", r.sandbox, "\n\n",
                  "| job kind | jobs | as expected | expected | wall per job, s (min / median / max) | observed |\n"
                  "|---|---|---|---|---|---|\n");
  for (const KindResult& k : r.kinds) {
    absl::StrAppend(&out, absl::StrFormat("| %s | %d | %d | %s | %s | %s |\n", k.kind, k.jobs, k.as_expected,
                                          k.expected, Triple(k.wall_s), Observed(k)));
  }
  return out;
}

std::vector<RecoverySample> OfVerdict(const std::vector<RecoverySample>& r, const std::string& verdict) {
  std::vector<RecoverySample> out;
  for (const RecoverySample& s : r) {
    if (verdict.empty() || s.verdict == verdict) out.push_back(s);
  }
  return out;
}

std::string FormatRecovery(const std::vector<RecoverySample>& all) {
  std::string out = absl::StrCat(
      "\n## Recovery after a hang or crash, s (min / median / max)\n",
      "| after | samples | failed evaluation (runner killed and reaped) | of which the kill beyond the wall "
      "limit | its end to the next PASSED measurement | of which the runner restart (sandbox, process, "
      "CUDA, exit) | of which the runner's own start-up | of which the first measurement |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const auto& [what, verdict] : {std::pair{"hang (TIMEOUT)", "TIMEOUT"}, std::pair{"crash (CRASHED)", "CRASHED"},
                                      std::pair{"all", ""}}) {
    const std::vector<RecoverySample> r = OfVerdict(all, verdict);
    absl::StrAppend(&out, "| ", what, " | ", r.size(), " | ", Triple(Field(r, &RecoverySample::failed_s)), " | ",
                    Triple(Field(r, &RecoverySample::kill_s)), " | ", Triple(Field(r, &RecoverySample::total_s)),
                    " | ", Triple(Field(r, &RecoverySample::restart_s)), " | ",
                    Triple(Field(r, &RecoverySample::startup_s)), " | ",
                    Triple(Field(r, &RecoverySample::measurement_s)), " |\n");
  }
  return out;
}

json RecoveryJson(const std::vector<RecoverySample>& all) {
  json samples = json::array();
  for (const RecoverySample& s : all) {
    samples.push_back({{"after", s.after}, {"verdict", s.verdict}, {"failed_s", s.failed_s},
                       {"kill_s", s.kill_s}, {"total_s", s.total_s}, {"restart_s", s.restart_s},
                       {"startup_s", s.startup_s}, {"measurement_s", s.measurement_s}});
  }
  json j = {{"samples", samples}};
  for (const char* verdict : {"TIMEOUT", "CRASHED", ""}) {
    const std::vector<RecoverySample> r = OfVerdict(all, verdict);
    j[*verdict ? verdict : "all"] = {{"n", r.size()},
                                     {"failed_s", SummaryJson(Field(r, &RecoverySample::failed_s))},
                                     {"kill_s", SummaryJson(Field(r, &RecoverySample::kill_s))},
                                     {"total_s", SummaryJson(Field(r, &RecoverySample::total_s))},
                                     {"restart_s", SummaryJson(Field(r, &RecoverySample::restart_s))},
                                     {"startup_s", SummaryJson(Field(r, &RecoverySample::startup_s))},
                                     {"measurement_s", SummaryJson(Field(r, &RecoverySample::measurement_s))}};
  }
  return j;
}

std::string FormatMemory(const MemoryReport& m) {
  return absl::StrFormat(
      "\n## Device memory (%s; slack %.0f MiB)\n- used before: %.0f MiB; at the end: %.0f MiB (%+.0f MiB)\n"
      "- after each hostile job, minus before (MiB): %s; back within the slack after (s): %s; "
      "never came back: %d\n",
      m.source, m.slack_mib, m.before_mib, m.end_mib, m.end_mib - m.before_mib,
      Triple(m.after_hostile_mib, 0, true), Triple(m.settle_s), m.not_returned);
}

std::string FormatLeaks(const LeakReport& l) {
  std::string out = absl::StrFormat(
      "\n## Leftovers: %s\n- processes: %d\n- scratch entries in %s: %d before, %d after\n"
      "- the soak's descriptors: %d before, %d after\n- job cgroups: %d\n",
      l.ok() ? "none" : "FOUND", l.processes.size(), l.scratch_dir, l.scratch_before, l.scratch_after,
      l.fds_before.size(), l.fds_after.size(), l.cgroups.size());
  for (const std::string& p : l.processes) absl::StrAppend(&out, "  - left: ", p, "\n");
  for (const std::string& c : l.cgroups) absl::StrAppend(&out, "  - cgroup: ", c, "\n");
  for (const std::string& p : l.suspects) absl::StrAppend(&out, "  - not shown to be ours: ", p, "\n");
  return out;
}

std::string FormatOverhead(const OverheadReport& o) {
  if (o.reps == 0) return "";
  std::string out = absl::StrCat("\n## Sandbox overhead, ms (min / median / max of ", o.reps, " each)\n",
                                 "| | no namespaces | namespaces (bwrap) | difference of medians |\n|---|---|---|---|\n");
  auto row = [&](const char* what, const std::vector<double>& none, const std::vector<double>& ns) {
    if (none.empty() && ns.empty()) return;
    const double diff = none.empty() || ns.empty() ? 0 : Summarize(ns).median - Summarize(none).median;
    absl::StrAppend(&out, absl::StrFormat("| %s | %s | %s | %+.1f |\n", what, Triple(none, 1),
                                          Triple(ns, 1), diff));
  };
  row("nvcc build (naive seed)", o.build_none_ms, o.build_ns_ms);
  row("evaluation (one small problem)", o.eval_none_ms, o.eval_ns_ms);
  row("of which the runner's own start-up", o.startup_none_ms, o.startup_ns_ms);
  if (!o.note.empty()) absl::StrAppend(&out, "\nNote: ", o.note, "\n");
  return out;
}

}  // namespace

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.n = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  const size_t mid = values.size() / 2;
  s.median = values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  return s;
}

bool LeakReport::ok() const {
  for (const std::string& fd : fds_after) {
    if (std::find(fds_before.begin(), fds_before.end(), fd) == fds_before.end()) return false;
  }
  return scratch_after == scratch_before && processes.empty() && cgroups.empty();
}

bool SoakReport::ok() const {
  const int planned = mix.builds + mix.evals + mix.hostile;
  const bool memory_ok = cpu_only || (!memory.source.empty() && memory.not_returned == 0 &&
                                      std::abs(memory.end_mib - memory.before_mib) <= memory.slack_mib);
  return !stopped_early && jobs_done == planned && unexpected.empty() && leaks.ok() && memory_ok;
}

std::string FormatReport(const SoakReport& r) {
  std::string out = FormatJobs(r);
  if (!r.cpu_only) absl::StrAppend(&out, FormatRecovery(r.recovery), FormatMemory(r.memory));
  absl::StrAppend(&out, FormatLeaks(r.leaks), FormatOverhead(r.overhead));
  if (!r.unexpected.empty()) {
    absl::StrAppend(&out, "\n## Not as expected (", r.unexpected.size(), ")\n");
    for (const std::string& u : r.unexpected) absl::StrAppend(&out, "- ", u, "\n");
  }
  absl::StrAppend(&out, "\nRESULT: ", r.ok() ? "PASS" : "FAIL", "\n");
  return out;
}

std::string ReportJson(const SoakReport& r) {
  json kinds = json::array();
  for (const KindResult& k : r.kinds) {
    kinds.push_back({{"kind", k.kind}, {"expected", k.expected}, {"jobs", k.jobs},
                     {"as_expected", k.as_expected}, {"wall_s", SummaryJson(k.wall_s)},
                     {"observed", k.observed}});
  }
  const MemoryReport& m = r.memory;
  const LeakReport& l = r.leaks;
  const OverheadReport& o = r.overhead;
  json j = {
      {"ok", r.ok()}, {"cpu_only", r.cpu_only},
      {"gpu", r.gpu}, {"gpu_uuid", r.gpu_uuid}, {"versions", r.versions}, {"sandbox", r.sandbox},
      {"mix", {{"builds", r.mix.builds}, {"evals", r.mix.evals}, {"hostile", r.mix.hostile}}},
      {"build_jobs", r.build_jobs},
      {"runner_limits_s", {{"startup", r.startup_timeout_s}, {"per_problem", r.problem_timeout_s}}},
      {"jobs_done", r.jobs_done}, {"stopped_early", r.stopped_early},
      {"setup_s", r.setup_s}, {"soak_s", r.soak_s},
      {"kinds", kinds},
      {"unexpected", r.unexpected},
      {"recovery", RecoveryJson(r.recovery)},
      {"memory", {{"source", m.source}, {"slack_mib", m.slack_mib}, {"before_mib", m.before_mib},
                  {"end_mib", m.end_mib}, {"delta_mib", m.end_mib - m.before_mib},
                  {"after_hostile_mib", SummaryJson(m.after_hostile_mib)},
                  {"settle_s", SummaryJson(m.settle_s)}, {"not_returned", m.not_returned}}},
      {"leaks", {{"ok", l.ok()}, {"scratch_dir", l.scratch_dir}, {"scratch_before", l.scratch_before},
                 {"scratch_after", l.scratch_after}, {"fds_before", l.fds_before},
                 {"fds_after", l.fds_after}, {"processes", l.processes}, {"suspects", l.suspects}, {"cgroups", l.cgroups}}},
      {"overhead_ms", {{"reps", o.reps}, {"note", o.note},
                       {"build_none", SummaryJson(o.build_none_ms)}, {"build_namespaces", SummaryJson(o.build_ns_ms)},
                       {"eval_none", SummaryJson(o.eval_none_ms)}, {"eval_namespaces", SummaryJson(o.eval_ns_ms)},
                       {"runner_startup_none", SummaryJson(o.startup_none_ms)},
                       {"runner_startup_namespaces", SummaryJson(o.startup_ns_ms)}}}};
  return j.dump(2);
}

}  // namespace anvil
