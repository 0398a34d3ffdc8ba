// The hostile and broken candidates of tests/adversarial and tests/broken as
// data: each file's source and what it must get, from its header:
//   // EXPECT: verdict=TIMEOUT reason=timeout|other
//   // POLICY: ...   (present when the source policy refuses it before nvcc)
// Shared by the harness GPU test and anvil-soak. Pure functions; thread-safe.
#ifndef ANVIL_TOOLS_SOAK_FIXTURES_H_
#define ANVIL_TOOLS_SOAK_FIXTURES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

struct Expectation {
  std::string verdict;               // without the prefix: "TIMEOUT"
  std::vector<std::string> reasons;  // any one of them; empty = any reason
  bool policy_rejects = false;       // the file has a "POLICY:" line
};

// nullopt when the source has no "EXPECT: verdict=..." line.
std::optional<Expectation> ParseExpectation(const std::string& source);

// True when a measurement's verdict and reason are what `e` names.
bool MeetsExpectation(const Expectation& e, v1::Verdict verdict, const std::string& reason);

// "TIMEOUT timeout" / "INCORRECT wrong_result|exact_mismatch".
std::string DescribeExpectation(const Expectation& e);

struct Fixture {
  std::string name;    // "<folder>/<stem>", e.g. "adversarial/infinite_loop"
  std::string source;
  Expectation expect;
};

// Every .cu file of `tests_dir`/`folder`, sorted by name. Fails when the
// folder is missing or empty, or a file has no EXPECT line (named).
absl::StatusOr<std::vector<Fixture>> LoadFixtures(const std::string& tests_dir,
                                                  const std::string& folder);

// The candidate the harness builds from a fixture: NT, sm_90a, family = stem.
v1::Candidate FixtureCandidate(const Fixture& f);

// The problem the EXPECT lines are written for: 130x200x72, no dimension a
// multiple of a tile.
v1::Shape FixtureShape();

// A short measurement protocol (2 rounds, few samples) under which the
// EXPECT lines hold: the cheats that behave for the first calls are still
// caught by the timed-output checks.
v1::RunnerProtocol FixtureProtocol();

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_FIXTURES_H_
