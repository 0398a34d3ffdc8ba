#include "proto/problem.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

TEST(ParseShape, AcceptsMxNxK) {
  absl::StatusOr<v1::Shape> s = ParseShape("4096x14336x128");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->m(), 4096);
  EXPECT_EQ(s->n(), 14336);
  EXPECT_EQ(s->k(), 128);
  EXPECT_EQ(ShapeName(*s), "4096x14336x128");
}

TEST(ParseShape, RejectsMalformed) {
  for (const char* bad : {"0x5x7", "4096x", "-1x2x3", "1x2", "1x2x3x4", "axbxc", "1x2x3.5",
                          "", "1x2x99999999999", "1x2x 3z"}) {
    absl::StatusOr<v1::Shape> s = ParseShape(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseShape, ErrorNamesTheDimension) {
  absl::StatusOr<v1::Shape> s = ParseShape("0x5x7");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("M must be between 1"), std::string::npos)
      << s.status();
}

TEST(ParseLayout, AcceptsBothLayoutsOnly) {
  EXPECT_EQ(*ParseLayout("nt"), v1::LAYOUT_NT);
  EXPECT_EQ(*ParseLayout("NN"), v1::LAYOUT_NN);
  EXPECT_FALSE(ParseLayout("xy").ok());
  EXPECT_FALSE(ParseLayout("").ok());
}

TEST(ParseShapesFile, ReadsLinesAndComments) {
  absl::StatusOr<std::vector<ShapeSpec>> specs =
      ParseShapesFile("# header\n256 128 128 nn\n\n16 4096 4096 nt  # decode\n");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[1].shape.n(), 4096);
  EXPECT_EQ((*specs)[1].layout, v1::LAYOUT_NT);
}

TEST(ParseShapesFile, NamesTheBadLine) {
  absl::StatusOr<std::vector<ShapeSpec>> specs = ParseShapesFile("1 2 3 nt\n1 2 nt\n");
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("line 2"), std::string::npos) << specs.status();
}

TEST(ValidateProblem, ChecksEveryField) {
  v1::Problem p = MakeProblem("H100", "sm_90a", *ParseShape("8x8x8"), v1::LAYOUT_NT);
  EXPECT_TRUE(ValidateProblem(p).ok());
  EXPECT_EQ(ProblemName(p), "8x8x8_nt");
  p.set_layout(v1::LAYOUT_UNSPECIFIED);
  EXPECT_FALSE(ValidateProblem(p).ok());
}

}  // namespace
}  // namespace anvil
