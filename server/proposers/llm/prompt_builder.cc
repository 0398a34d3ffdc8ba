#include "server/proposers/llm/prompt_builder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prompts/prompts.h"
#include "reward/profile_hint.h"

namespace anvil {
namespace {

absl::StatusOr<ContrastExemplar> ToExemplar(HistoryReader& h, const Exemplar& e,
                                            const std::string& problem_name) {
  ContrastExemplar c{e.candidate, e.measurement.measurement, {}, problem_name};
  absl::StatusOr<std::optional<v1::Build>> build = h.LatestBuild(e.candidate.id());
  if (!build.ok()) return build.status();
  if (build->has_value()) c.usage.assign((*build)->usage().begin(), (*build)->usage().end());
  return c;
}

std::string DeviceFacts(const SearchView& view) {
  if (!view.device.has_value()) return "";
  return absl::StrFormat("- This device: %s, %d SMs.", view.device->gpu(), view.device->sm_count());
}

}  // namespace

absl::StatusOr<PromptBuilder> PromptBuilder::Load(const std::string& dir) {
  PromptBuilder b;
  for (const char* name : {"system", "task", "contrastive", "repair"}) {
    absl::StatusOr<std::string> t = LoadPrompt(dir, name);
    if (!t.ok()) return t.status();
    b.templates_[name] = *t;
  }
  return b;
}

std::vector<int> NearestProblems(const SearchView& view, int problem, int n) {
  const v1::Shape& s = view.problems[problem].problem.shape();
  std::vector<std::pair<double, int>> near;
  for (size_t i = 0; i < view.problems.size(); ++i) {
    const ProblemView& p = view.problems[i];
    if (int(i) == problem || !p.active || p.problem.layout() != view.problems[problem].problem.layout()) continue;
    const v1::Shape& t = p.problem.shape();
    const double d = std::abs(std::log2(double(t.m()) / s.m())) + std::abs(std::log2(double(t.n()) / s.n())) +
                     std::abs(std::log2(double(t.k()) / s.k()));
    near.push_back({d, int(i)});
  }
  std::sort(near.begin(), near.end());
  std::vector<int> out;
  for (size_t i = 0; i < near.size() && int(i) < n; ++i) out.push_back(near[i].second);
  return out;
}

std::string TrimLog(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return absl::StrCat(text.substr(0, max_chars / 2), "\n[... ", text.size() - max_chars,
                      " characters cut ...]\n", text.substr(text.size() - max_chars / 2));
}

absl::StatusOr<std::vector<ContrastExemplar>> PromptBuilder::Gather(const SearchView& view, int problem,
                                                                   const std::string& recipe, int n) const {
  HistoryReader& h = *view.history;
  const ProblemView& p = view.problems[problem];
  std::vector<ContrastExemplar> out;
  absl::StatusOr<ExemplarSet> set = h.Exemplars(p.problem, view.figure, recipe == "contrast" ? n + 1 : 1);
  if (!set.ok()) return set.status();
  std::vector<const Exemplar*> chosen;
  for (const Exemplar& e : set->fastest) chosen.push_back(&e);
  if (recipe == "contrast") {
    for (const Exemplar& e : set->slowest) chosen.push_back(&e);
  } else if (chosen.size() > 1) {
    chosen.resize(1);
  }
  for (const Exemplar* e : chosen) {
    absl::StatusOr<ContrastExemplar> c = ToExemplar(h, *e, p.name);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  if (recipe != "neighbours") return out;
  for (int other : NearestProblems(view, problem, n)) {
    absl::StatusOr<ExemplarSet> o = h.Exemplars(view.problems[other].problem, view.figure, 1);
    if (!o.ok()) return o.status();
    if (o->fastest.empty()) continue;
    absl::StatusOr<ContrastExemplar> c = ToExemplar(h, o->fastest[0], view.problems[other].name);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  return out;
}

absl::StatusOr<BuiltPrompt> PromptBuilder::Build(const SearchView& view, int problem,
                                                const std::string& recipe, int exemplars) const {
  const ProblemView& p = view.problems[problem];
  BuiltPrompt out;
  absl::StatusOr<std::vector<ContrastExemplar>> ex = Gather(view, problem, recipe, exemplars);
  if (!ex.ok()) return ex.status();
  out.exemplars = std::move(*ex);
  const std::string arch = view.device ? view.device->arch() : p.problem.arch();
  absl::StatusOr<std::string> system = RenderPrompt(
      templates_.at("system"),
      {{"gpu", view.device ? view.device->gpu() : p.problem.gpu()},
       {"arch", arch.empty() ? "sm_90a" : arch},
       {"sm_count", view.device ? absl::StrCat(view.device->sm_count()) : "132"},
       {"device_facts", DeviceFacts(view)}});
  if (!system.ok()) return system.status();
  out.system = *system;
  std::string best = "No correct kernel has been measured on this problem yet.";
  if (!out.exemplars.empty()) {
    const ContrastExemplar& b = out.exemplars[0];
    out.hint = SummariseProfile(b.measurement).text;
    best = absl::StrFormat("The current best (A below) runs at %.3fx the fastest vendor baseline "
                           "by %s time.\nWhat its profile says:\n%s",
                           ExemplarSpeedup(b.measurement, view.figure), view.figure, out.hint);
  }
  const v1::Shape& s = p.problem.shape();
  const bool nt = p.problem.layout() == v1::LAYOUT_NT;
  absl::StatusOr<std::string> task = RenderPrompt(
      templates_.at("task"), {{"b_operand", nt ? "B[N x K]^T" : "B[K x N]"}, {"m", absl::StrCat(s.m())},
                              {"n", absl::StrCat(s.n())}, {"k", absl::StrCat(s.k())},
                              {"layout", nt ? "nt" : "nn"}, {"figure", view.figure}, {"best", best}});
  if (!task.ok()) return task.status();
  out.user = *task;
  if (!out.exemplars.empty()) {
    absl::StatusOr<std::string> contrast = RenderPrompt(
        templates_.at("contrastive"), {{"exemplars", RenderContrast(out.exemplars, view.figure)}});
    if (!contrast.ok()) return contrast.status();
    absl::StrAppend(&out.user, "\n", *contrast);
  } else {
    absl::StrAppend(&out.user, "\nWrite a fast, correct kernel for this problem.\n");
  }
  return out;
}

absl::StatusOr<std::string> PromptBuilder::Repair(const std::string& name, const std::string& failure,
                                                 const std::string& log) const {
  return RenderPrompt(templates_.at("repair"), {{"name", name}, {"failure", failure}, {"log", log}});
}

}  // namespace anvil
