#include "proto/candidate.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

v1::Candidate Make(const std::string& source) {
  v1::Candidate c;
  c.set_source(source);
  c.set_family("sm80_mma");
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  (*c.mutable_params())["BM"] = "128";
  (*c.mutable_params())["BN"] = "64";
  AssignCandidateId(c);
  return c;
}

TEST(CandidateId, IgnoresWhitespaceThatChangesNothing) {
  EXPECT_EQ(Make("int x;\nint y;\n").id(), Make("int x;   \r\nint y;\n\n\n").id());
  EXPECT_NE(Make("int x;\n").id(), Make("int y;\n").id());
  EXPECT_EQ(Make("a").id().size(), 64u);
}

TEST(CandidateId, DependsOnParamsLayoutAndArch) {
  v1::Candidate a = Make("k");
  v1::Candidate b = a;
  (*b.mutable_params())["BM"] = "64";
  AssignCandidateId(b);
  EXPECT_NE(a.id(), b.id());
  b = a;
  b.set_layout(v1::LAYOUT_NN);
  AssignCandidateId(b);
  EXPECT_NE(a.id(), b.id());
  b = a;
  b.set_arch("sm_90");
  AssignCandidateId(b);
  EXPECT_NE(a.id(), b.id());
}

TEST(CandidateDisplayName, IsBuiltFromParams) {
  v1::Candidate c = Make("k");
  EXPECT_EQ(CandidateDisplayName(c), "sm80_mma_bm128_bn64_nt_" + c.id().substr(0, 8));
}

TEST(Sha256Hex, MatchesKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace anvil
