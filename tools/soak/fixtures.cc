#include "tools/soak/fixtures.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/candidate.h"
#include "proto/problem.h"

namespace anvil {
namespace fs = std::filesystem;

std::optional<Expectation> ParseExpectation(const std::string& source) {
  static const std::regex kExpect(R"(EXPECT:\s*verdict=([A-Za-z_]+)(?:\s+reason=([A-Za-z0-9_|/]+))?)");
  static const std::regex kPolicy(R"((^|\n)[ \t]*//[ \t]*POLICY:)");
  std::smatch m;
  if (!std::regex_search(source, m, kExpect)) return std::nullopt;
  Expectation e;
  e.verdict = m[1].str();
  for (absl::string_view r : absl::StrSplit(m[2].str(), absl::ByAnyChar("|/"), absl::SkipEmpty())) {
    e.reasons.emplace_back(r);
  }
  e.policy_rejects = std::regex_search(source, kPolicy);
  return e;
}

bool MeetsExpectation(const Expectation& e, v1::Verdict verdict, const std::string& reason) {
  if (v1::Verdict_Name(verdict) != "VERDICT_" + e.verdict) return false;
  return e.reasons.empty() || std::find(e.reasons.begin(), e.reasons.end(), reason) != e.reasons.end();
}

std::string DescribeExpectation(const Expectation& e) {
  return e.reasons.empty() ? e.verdict : absl::StrCat(e.verdict, " ", absl::StrJoin(e.reasons, "|"));
}

absl::StatusOr<std::vector<Fixture>> LoadFixtures(const std::string& tests_dir,
                                                  const std::string& folder) {
  const fs::path dir = fs::path(tests_dir) / folder;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".cu") files.push_back(e.path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir.string(), ": ", ec.message()));
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no .cu candidates in ", dir.string()));
  std::sort(files.begin(), files.end());
  std::vector<Fixture> out;
  for (const fs::path& p : files) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    Fixture f{absl::StrCat(folder, "/", p.stem().string()), ss.str(), {}};
    std::optional<Expectation> e = ParseExpectation(f.source);
    if (!e) return absl::InvalidArgumentError(absl::StrCat(p.string(), " has no EXPECT: line"));
    f.expect = *e;
    out.push_back(std::move(f));
  }
  return out;
}

v1::Candidate FixtureCandidate(const Fixture& f) {
  v1::Candidate c;
  c.set_source(f.source);
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  c.set_family(f.name.substr(f.name.rfind('/') + 1));
  AssignCandidateId(c);
  c.set_name(CandidateDisplayName(c));
  return c;
}

v1::Shape FixtureShape() { return *ParseShape("130x200x72"); }

v1::RunnerProtocol FixtureProtocol() {
  v1::RunnerProtocol p;
  p.set_rounds(2);
  p.set_device_samples(3);
  p.set_cold_samples(1);
  p.set_warm_calls(5);
  p.set_call_samples(2);
  p.set_warmup_calls(2);
  p.set_warmup_ms(1);
  p.set_lt_auto_algos(2);
  return p;
}

}  // namespace anvil
