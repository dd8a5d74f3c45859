#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "optireduce/engine/report/report.hpp"

namespace optireduce {
namespace {

RankFigures figures(double calls, double dropped, double entries, double late_wait_us) {
  RankFigures f;
  f.calls = calls;
  f.intercepted = calls - 1;
  f.bounded = calls - 3;
  f.cut = 2;
  f.entries = entries;
  f.dropped = dropped;
  f.time_us = 1.5e6;
  f.fallbacks = 1;
  f.divergent = 0;
  f.late_messages = 3;
  f.late_wait_us = late_wait_us;
  return f;
}

TEST(Report, CostLineSumsRanksAndTakesAgreedCountsOnce) {
  const std::vector<RankFigures> ranks = {figures(10, 40, 10000, 20.5e6), figures(10, 0, 10000, 20.5e6)};
  EXPECT_TRUE(had_cost(ranks));
  EXPECT_EQ(render_cost_line(ranks),
            "optireduce: 20 allreduce calls over 2 ranks (18 through the engine, 14 bounded, 4 cut by a deadline), "
            "3 s in allreduce; 40 of 20000 entries compensated, 1 fallbacks to exact calls, 0 divergent calls; "
            "deadlines saved 41 s of waiting, cost 0.2 % of entries");
}

TEST(Report, CostLineNamesTheReduceScattersApart) {
  std::vector<RankFigures> ranks = {figures(10, 40, 10000, 20.5e6), figures(10, 0, 10000, 20.5e6)};
  ranks[0].reduce_scatter_calls = 4;
  ranks[1].reduce_scatter_calls = 2;
  EXPECT_EQ(render_cost_line(ranks),
            "optireduce: 14 allreduce and 6 reduce-scatter calls over 2 ranks (18 through the engine, 14 bounded, 4 cut "
            "by a deadline), 3 s in allreduce and reduce-scatter; 40 of 20000 entries compensated, 1 fallbacks to exact "
            "calls, 0 divergent calls; deadlines saved 41 s of waiting, cost 0.2 % of entries");
}

TEST(Report, InterceptedCallsByOperationAndFormat) {
  RankReport r;
  r.stats.intercepted_calls = 6;
  r.stats.intercepted_by_shape[CallShape{Collective::allreduce, ElementFormat::float32}.index()] = 3;
  r.stats.intercepted_by_shape[CallShape{Collective::allreduce, ElementFormat::bfloat16}.index()] = 1;
  r.stats.intercepted_by_shape[CallShape{Collective::reduce_scatter, ElementFormat::float32}.index()] = 2;
  r.stats.passthrough_calls = 5;
  r.stats.passthrough_by_collective = {4, 1};
  const std::string json = render_rank(r);
  EXPECT_NE(json.find("\"intercepted_calls\": 6, \"intercepted_by_operation\": {\"allreduce\": {\"bfloat16\": 1, "
                      "\"float16\": 0, \"float32\": 3}, \"reduce_scatter\": {\"bfloat16\": 0, \"float16\": 0, "
                      "\"float32\": 2}}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"passthrough_by_operation\": {\"allreduce\": 4, \"reduce_scatter\": 1}"), std::string::npos) << json;
  EXPECT_EQ(figures_of(r).reduce_scatter_calls, 3);
}

TEST(Report, NoCostWithoutCompensationFallbackOrDivergence) {
  RankFigures clean;
  clean.calls = clean.intercepted = 5;
  clean.entries = 100;
  EXPECT_FALSE(had_cost({clean, clean}));
  clean.divergent = 1;
  EXPECT_TRUE(had_cost({clean}));
}

TEST(Report, EverySettingInTheReportWithItsEffectiveValue) {
  const Environment env = {{"OPTIREDUCE_MIN_BYTES", "64K"}, {"OPTIREDUCE_FAULT_DROP", "0.01"}};
  const ConfigResult parsed = parse_config(env);
  ASSERT_TRUE(parsed.ok());
  const auto settings = effective_settings(env, parsed.config);
  ASSERT_EQ(settings.size(), parameters().size());
  const std::string json = render_report(settings, {});
  for (const auto& p : parameters()) {
    std::string key = p.name.substr(11);
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_NE(json.find("\"" + key + "\": "), std::string::npos) << key;
  }
  EXPECT_NE(json.find("\"min_bytes\": \"64K\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"mode\": \"bounded\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"config_from_environment\": [\"min_bytes\", \"fault_drop\"]"), std::string::npos) << json;
}

TEST(Report, WaitSavedCountsEachCallOnceByItsLatestData) {
  LateArrivals late;
  late.add(7, 10, 100);  // call 7: three messages late by 10, 30 and 20 us: the call would have waited 30
  late.add(7, 30, 100);
  late.add(7, 20, 100);
  late.add(9, 5, 50);    // call 9: 5 us
  EXPECT_EQ(late.messages, 4u);
  EXPECT_EQ(late.bytes, 350u);
  EXPECT_DOUBLE_EQ(late.wait_us, 65);
  EXPECT_DOUBLE_EQ(late.call_wait_us, 35);
}

TEST(Report, OutputPathProblems) {
  const auto dir = std::filesystem::temp_directory_path() / ("optireduce_report_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fresh = (dir / "fresh.json").string();
  EXPECT_EQ(output_path_problem(fresh), "");
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "the check leaves no file behind";
  EXPECT_EQ(output_path_problem((dir / "missing" / "r.json").string()), "the directory " + (dir / "missing").string() + " does not exist");
  EXPECT_EQ(output_path_problem(dir.string()), "it is a directory");
  const std::string existing = (dir / "existing.json").string();
  std::ofstream(existing) << "kept";
  EXPECT_EQ(output_path_problem(existing), "");
  EXPECT_EQ(std::filesystem::file_size(existing), 4u) << "an existing file is not truncated";
  EXPECT_EQ(output_path_problem((dir / "existing.json" / "r.json").string()), "Not a directory");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace optireduce
