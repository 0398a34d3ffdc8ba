#include "server/rpc/requests.h"

#include <gtest/gtest.h>

#include "proto/problem.h"

namespace anvil::rpc {
namespace {

v1::OptimizeKernelRequest Good() {
  v1::OptimizeKernelRequest r;
  v1::Problem* p = r.add_problems();
  *p->mutable_shape() = MakeShape(128, 256, 64);
  p->set_layout(v1::LAYOUT_NT);
  r.set_request_id("client-7");
  return r;
}

TEST(ValidateOptimizeRequest, AcceptsAGoodOneAndNamesTheBadField) {
  ServerOptions o;
  EXPECT_TRUE(ValidateOptimizeRequest(Good(), o).ok());
  struct Case {
    const char* field;
    std::function<void(v1::OptimizeKernelRequest&)> spoil;
  } cases[] = {
      {"problems", [](auto& r) { r.clear_problems(); }},
      {"problems[0]", [](auto& r) { r.mutable_problems(0)->mutable_shape()->set_m(0); }},
      {"problems[0]", [](auto& r) { r.mutable_problems(0)->mutable_shape()->set_k(int64_t{1} << 40); }},
      {"problems[0]", [](auto& r) { r.mutable_problems(0)->set_layout(v1::LAYOUT_UNSPECIFIED); }},
      {"proposer", [](auto& r) { r.set_proposer("magic"); }},
      {"reward_figure", [](auto& r) { r.set_reward_figure("fastest"); }},
      {"budget", [](auto& r) { r.mutable_budget()->set_max_wall_seconds(-1); }},
      {"request_id", [](auto& r) { r.set_request_id("has space"); }},
      {"request_id", [](auto& r) { r.set_request_id(std::string(129, 'a')); }},
  };
  for (const Case& c : cases) {
    v1::OptimizeKernelRequest r = Good();
    c.spoil(r);
    absl::Status st = ValidateOptimizeRequest(r, o);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st;
  }
  o.max_problems_per_job = 1;
  v1::OptimizeKernelRequest two = Good();
  *two.add_problems() = two.problems(0);
  EXPECT_EQ(ValidateOptimizeRequest(two, o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateJobId, Bounds) {
  EXPECT_TRUE(ValidateJobId("job-1").ok());
  EXPECT_FALSE(ValidateJobId("").ok());
  EXPECT_FALSE(ValidateJobId("a\nb").ok());
  EXPECT_FALSE(ValidateJobId(std::string(200, 'j')).ok());
}

}  // namespace
}  // namespace anvil::rpc
