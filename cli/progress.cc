#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "proto/problem.h"

namespace anvil::cli {
namespace {

constexpr char kBold[] = "1", kGreen[] = "32", kRed[] = "31";

std::string Clock(double seconds) {
  const int s = static_cast<int>(std::max(0.0, seconds));
  return s >= 3600 ? absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
                   : absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string Bar(double fraction, size_t width) {
  const size_t full = std::min(width, static_cast<size_t>(std::clamp(fraction, 0.0, 1.0) * width + 0.5));
  std::string bar(width, '.');
  bar.replace(0, full, full, '#');
  return absl::StrCat("[", bar, "]");
}

bool Shown(ProgressEvent::Kind kind, int verbosity) {
  using K = ProgressEvent::Kind;
  if (kind == K::kTick) return false;
  if (verbosity <= 0) return false;  // quiet: the caller's summary only
  if (kind == K::kMeasured) return verbosity >= 2;
  return true;
}

}  // namespace

DisplayOptions StdoutDisplayOptions(bool quiet, bool verbose) {
  DisplayOptions o;
  o.verbosity = quiet ? 0 : verbose ? 2 : 1;
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::strcmp(term, "dumb") == 0;
  o.live = isatty(STDOUT_FILENO) == 1 && !dumb && !quiet;
  o.color = o.live && std::getenv("NO_COLOR") == nullptr;
  winsize ws{};
  if (o.live && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) o.width = ws.ws_col;
  return o;
}

std::string ProgressDisplay::Paint(const std::string& text, const char* code) const {
  return options_.color ? absl::StrCat("\x1b[", code, "m", text, "\x1b[0m") : text;
}

std::vector<std::string> ProgressDisplay::Block(const ProgressEvent& e) const {
  std::vector<std::string> lines;
  const double minutes = std::max(e.elapsed_s, 1.0) / 60;
  std::string budget = e.budget_s > 0
                           ? absl::StrCat(" of ", Clock(e.budget_s), " ", Bar(e.elapsed_s / e.budget_s, 24),
                                          absl::StrFormat(" %.0f%%", 100 * std::min(1.0, e.elapsed_s / e.budget_s)))
                           : "";
  lines.push_back(absl::StrCat(Paint(absl::StrCat("anvil ", e.job_id), kBold), "  ", e.state, "  ",
                               Clock(e.elapsed_s), budget));
  lines.push_back(absl::StrFormat(
      "  problems measured %d/%d · builds %d (%d failed, %.1f/min) · measurements %d (%.1f/min)",
      e.problems_measured, e.problems_total, e.builds, e.build_failures, e.builds / minutes,
      e.measurements, e.measurements / minutes));
  if (e.elapsed_s > 0 && e.gpu_s > 0) {
    std::string line = absl::StrFormat("  GPU busy %.0f%% (measuring %s of %s)",
                                       100 * std::min(1.0, e.gpu_s / e.elapsed_s), Clock(e.gpu_s),
                                       Clock(e.elapsed_s));
    if (e.has_waits) {
      absl::StrAppend(&line, absl::StrFormat(" · waiting on builds %s · in proposers %s",
                                             Clock(e.build_wait_s), Clock(e.proposer_s)));
    }
    lines.push_back(line);
  }
  std::vector<std::string> cells;  // one per problem, wrapped at the terminal's width
  size_t width = 0;
  for (const auto& [problem, speedup] : e.best) {
    std::string value = speedup > 0 ? absl::StrFormat("%.3fx", speedup) : "-";
    const size_t visible = problem.size() + value.size() + 3;
    if (speedup > 0) value = Paint(value, speedup >= 1 ? kGreen : kRed);
    if (!cells.empty() && static_cast<int>(width + visible) > options_.width) {
      lines.push_back(absl::StrCat(" ", absl::StrJoin(cells, "")));
      cells.clear();
      width = 0;
    }
    cells.push_back(absl::StrCat(" ", problem, " ", value, " "));
    width += visible;
  }
  if (!cells.empty()) lines.push_back(absl::StrCat(" ", absl::StrJoin(cells, "")));
  return lines;
}

void ProgressDisplay::Redraw(const ProgressEvent& event) {
  if (drawn_lines_ > 0) out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";  // up to the block, clear below
  std::vector<std::string> lines = Block(event);
  for (const std::string& l : lines) out_ << l << "\n";
  drawn_lines_ = static_cast<int>(lines.size());
  out_.flush();
}

void ProgressDisplay::PrintLine(const ProgressEvent& e) {
  using K = ProgressEvent::Kind;
  std::string line = e.message;
  if (e.kind == K::kState && line.empty()) line = absl::StrCat("job ", e.job_id, " ", e.state);
  if (line.empty()) return;
  if (options_.color && e.kind == K::kNewBest) line = Paint(line, kGreen);
  if (options_.color && e.kind == K::kBuildFailed) line = Paint(line, kRed);
  if (options_.live && drawn_lines_ > 0) {
    out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";  // the line goes where the block was
    drawn_lines_ = 0;
  }
  out_ << line << "\n";
}

void ProgressDisplay::Handle(const ProgressEvent& event) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  if (Shown(event.kind, options_.verbosity)) PrintLine(event);
  if (options_.live) Redraw(event);
  out_.flush();
}

void ProgressDisplay::Finish() {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  finished_ = true;
  out_.flush();
}

void FillFromActivity(const JobActivity& a, int problems_total, ProgressEvent& e) {
  e.job_id = a.job_id;
  e.problems_total = std::max<int>(problems_total, static_cast<int>(a.problems.size()));
  e.problems_measured = static_cast<int>(a.problems.size());
  e.builds = a.builds;
  e.build_failures = a.failed_builds;
  e.measurements = a.measurements;
  e.best.clear();
  for (const ProblemActivity& p : a.problems) {
    e.best.push_back({absl::StrCat(ShapeName(p.problem.shape()), " ", LayoutName(p.problem.layout())),
                      p.best_speedup});
  }
}

ProgressEvent FromJobProgress(const v1::JobProgress& p, double budget_s) {
  using K = ProgressEvent::Kind;
  ProgressEvent e;
  const std::string& kind = p.event();
  e.kind = kind == "state" ? K::kState : kind == "new_best" ? K::kNewBest
         : kind == "build_failed" ? K::kBuildFailed : kind == "measured" ? K::kMeasured : K::kLog;
  e.message = p.message().empty() ? "" : "  " + p.message();  // indented, as the search's lines
  const v1::Job& job = p.job();
  e.job_id = job.id();
  std::string state = v1::JobState_Name(job.state());
  e.state = absl::AsciiStrToLower(absl::StripPrefix(state, "JOB_STATE_"));
  e.elapsed_s = job.wall_seconds();
  e.gpu_s = job.gpu_seconds();
  e.budget_s = budget_s;
  e.problems_total = job.problems_size();
  for (const v1::ProblemProgress& pp : job.problems()) {
    e.measurements += pp.candidates_tried();
    e.problems_measured += pp.candidates_tried() > 0;
    e.best.push_back({absl::StrCat(ShapeName(pp.problem().shape()), " ", LayoutName(pp.problem().layout())),
                      pp.speedup()});
  }
  return e;
}

ProgressEvent FromJobEvent(const JobEvent& ev) {
  using K = ProgressEvent::Kind;
  v1::JobProgress p;  // the same fields as the stream's, then the usage on top
  *p.mutable_job() = ev.job;
  p.set_message(ev.message);
  p.set_event(JobEventKindName(ev.kind));
  ProgressEvent e = FromJobProgress(p, ev.usage.max_wall_seconds);
  if (ev.kind == JobEventKind::kProblemDone) e.kind = K::kLog;
  if (ev.usage.wall_seconds > 0) e.elapsed_s = ev.usage.wall_seconds;
  if (ev.usage.gpu_seconds > 0) e.gpu_s = ev.usage.gpu_seconds;
  e.build_wait_s = ev.usage.coordinator.build_wait_seconds;
  e.proposer_s = ev.usage.coordinator.proposer_seconds;
  e.has_waits = true;
  e.measurements = ev.usage.candidates;
  for (const auto& [name, u] : ev.usage.by_proposer) {
    e.builds += u.built;
    e.build_failures += u.build_failures;
  }
  return e;
}

}  // namespace anvil::cli
