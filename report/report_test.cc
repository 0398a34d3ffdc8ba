// Report tests: the model read from a store a small search wrote (winners in
// every regime, curves, roofline ceilings, failures, rewards), the page
// rendered from it, and the file written whole. The page in a browser:
// report/browser_test.py.
#include "report/report.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "proto/figures.h"
#include "report/report_test_store.h"
#include "report/test_store_fixture.h"

namespace anvil::report {
namespace {

using nlohmann::json;

class ReportTest : public testing::TestStoreFixture {
 protected:
  json Model(ReportOptions options = {}) {
    absl::StatusOr<json> model = BuildReportModel(*store_, options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.value_or(json());
  }
};

TEST_F(ReportTest, JobModelHasEveryProblemAndRegime) {
  ReportOptions options;
  options.job_id = testing::kTestJob;
  json m = Model(options);
  EXPECT_EQ(m["scope"]["kind"], "job");
  EXPECT_EQ(m["scope"]["job"]["state"], "running");
  EXPECT_EQ(m["regimes"].get<std::vector<std::string>>(),
            std::vector<std::string>(kFigures.begin(), kFigures.end()));
  EXPECT_EQ(m["figure"], std::string(kDefaultFigure));  // the job names none
  ASSERT_EQ(m["problems"].size(), 3u);
  const json& big = m["problems"][0];
  EXPECT_EQ(big["name"], "4096x4096x4096 nt");
  // The verified re-measurement wins, at the search's final gain over cublaslt_auto (0.99 x cuBLAS).
  const json& device = big["regimes"]["device"];
  EXPECT_NEAR(device["speedup"].get<double>(), 1.06 * 0.99, 1e-6);
  EXPECT_EQ(device["baseline"], "cublaslt_auto");
  EXPECT_TRUE(device["verified"].get<bool>());
  EXPECT_LT(device["speedup_lo"].get<double>(), device["speedup"].get<double>());
  EXPECT_GT(device["speedup_hi"].get<double>(), device["speedup"].get<double>());
  EXPECT_EQ(big["winner"]["proposer"], "embedded");
  EXPECT_EQ(big["winner"]["params"]["TILE"].get<std::string>().size(), 10u);
  EXPECT_GT(big["efficiency"].get<double>(), 0.3);
  EXPECT_EQ(big["curve"]["tried"], 24);  // the verify stage re-measures a candidate already tried
}

TEST_F(ReportTest, CurvesRiseAndNameTheirProposers) {
  json m = Model();
  EXPECT_EQ(m["scope"]["kind"], "store");
  for (const json& p : m["problems"]) {
    const json& steps = p["curve"]["steps"];
    ASSERT_FALSE(steps.empty()) << p["name"];
    EXPECT_EQ(steps[0]["proposer"], "seed");
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_GT(steps[i]["speedup"].get<double>(), steps[i - 1]["speedup"].get<double>());
      EXPECT_GE(steps[i]["tried"].get<int>(), steps[i - 1]["tried"].get<int>());
      EXPECT_GE(steps[i]["t_s"].get<double>(), steps[i - 1]["t_s"].get<double>());
      EXPECT_GT(steps[i]["gpu_s"].get<double>(), steps[i - 1]["gpu_s"].get<double>());
    }
  }
}

TEST_F(ReportTest, CeilingsAreRecoveredFromSpeedOfLight) {
  json c = Model()["ceilings"][testing::kTestGpu];
  EXPECT_NEAR(c["flops_per_s"].get<double>(), 7.6e14, 7.6e14 * 1e-9);
  EXPECT_NEAR(c["bytes_per_s"].get<double>(), 3.0e12, 3.0e12 * 1e-9);  // 16x4096x4096 is bandwidth-bound
  EXPECT_TRUE(c["flops_exact"].get<bool>());
  EXPECT_TRUE(c["bytes_exact"].get<bool>());
}

TEST_F(ReportTest, FailuresCoverVerdictsAndCompileErrors) {
  ReportOptions options;
  options.job_id = testing::kTestJob;
  json f = Model(options)["failures"];
  std::map<std::string, double> share;
  double sum = 0;
  for (const json& v : f["verdicts"]) {
    share[v["verdict"]] = v["share"].get<double>();
    sum += v["share"].get<double>();
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  for (const char* v : {"passed", "compile_error", "incorrect", "timeout", "cheat", "crashed"}) {
    EXPECT_GT(share[v], 0) << v;
  }
  bool undefined = false;
  for (const json& r : f["reasons"]) {
    undefined = undefined || (r["verdict"] == "compile_error" && r["reason"] == "identifier \"…\" is undefined" &&
                              r["count"] == 2);
  }
  EXPECT_TRUE(undefined) << f["reasons"].dump(1);
}

TEST_F(ReportTest, RewardsCarryProposerAndRecipe) {
  ReportOptions options;
  options.job_id = testing::kTestJob;
  json r = Model(options)["rewards"];
  ASSERT_EQ(r.size(), 72u);
  std::set<std::string> recipes;
  for (const json& x : r) {
    if (x["proposer"] == "llm") recipes.insert(x["recipe"].get<std::string>());
  }
  EXPECT_EQ(recipes, (std::set<std::string>{"best+contrastive", "best-only", "repair"}));
}

TEST_F(ReportTest, FiltersAndBadInput) {
  ReportOptions other_gpu;
  other_gpu.gpu = "H200";
  EXPECT_TRUE(Model(other_gpu)["problems"].empty());
  ReportOptions missing;
  missing.job_id = "job-nope";
  EXPECT_EQ(BuildReportModel(*store_, missing).status().code(), absl::StatusCode::kNotFound);
  ReportOptions figure;
  figure.figure = "fastest";
  EXPECT_EQ(BuildReportModel(*store_, figure).status().code(), absl::StatusCode::kInvalidArgument);
  figure.figure = "warm";
  EXPECT_EQ(Model(figure)["figure"], "warm");
}

TEST_F(ReportTest, PageInlinesEverythingAndIsWrittenWhole) {
  json m = Model();
  m["scope"]["store"] = "</script><script>alert(1)</script>";
  const std::string html = RenderReportHtml(m);
  EXPECT_NE(html.find("plotly.js v3.1.1"), std::string::npos);
  EXPECT_NE(html.find("id=\"anvil-data\""), std::string::npos);
  EXPECT_EQ(html.find("<!--ANVIL:"), std::string::npos);
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // nothing fetched
  EXPECT_EQ(html.find("<link rel=\"stylesheet\""), std::string::npos);
  const std::string path = dir_ + "/report.html";
  ASSERT_TRUE(WriteReport(*store_, {}, path).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_GT(ss.str().size(), 4'000'000u);
  EXPECT_EQ(ss.str().substr(ss.str().size() - 8), "</html>\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::Status bad = WriteReport(*store_, {}, dir_ + "/no/such/dir/report.html");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("no/such/dir"), std::string::npos);
}

TEST(ScriptSafeJsonTest, EscapesWhatEndsAScript) {
  json v = {{"a", "</script>"}, {"b", "<!-- x"}};
  EXPECT_EQ(ScriptSafeJson(v), R"({"a":"<\/script>","b":"\u003c!-- x"})");
  EXPECT_EQ(json::parse(ScriptSafeJson(v)), v);
}

}  // namespace
}  // namespace anvil::report
