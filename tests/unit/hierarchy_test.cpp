// The slice mapping of many ranks per host (hierarchy/): which rank reduces which range inside
// its host, which ranks exchange each slice across hosts, and what each host's link carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/hierarchy/host_sum.hpp"
#include "optireduce/engine/hierarchy/shape.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce {
namespace {

// Every property the three stages rely on, element by element, for one buffer length.
void check_map(const Placement& p, std::size_t elements, std::size_t granule) {
  const SliceMap map = map_slices(p);
  SCOPED_TRACE("placement " + p.counts_text() + ", " + std::to_string(elements) + " elements");
  // The slices tile the buffer in order.
  std::size_t at = 0;
  for (int s = 0; s < static_cast<int>(map.slices.size()); ++s) {
    const ElementRange r = map.elements_of(s, elements, granule);
    EXPECT_EQ(r.begin, at);
    EXPECT_LE(r.begin, r.end);
    EXPECT_TRUE(r.begin % granule == 0 || r.begin == elements);
    at = r.end;
  }
  EXPECT_EQ(at, elements);
  // Each slice has one holder on every host, in host order: its exchange spans every host once.
  std::vector<double> link_out(p.hosts(), 0);
  const double hosts = p.hosts();
  for (int s = 0; s < static_cast<int>(map.slices.size()); ++s) {
    const auto& ranks = map.slices[s].ranks;
    ASSERT_EQ(static_cast<int>(ranks.size()), p.hosts());
    for (int h = 0; h < p.hosts(); ++h) EXPECT_EQ(p.host_of_rank[ranks[h]], h);
    for (int h = 0; h < p.hosts(); ++h) link_out[h] += 2 * (hosts - 1) / hosts * map.elements_of(s, elements, granule).size();
  }
  // No host's link carries more than its share, whatever its number of ranks.
  for (int h = 0; h < p.hosts(); ++h) EXPECT_DOUBLE_EQ(link_out[h], hierarchical_link_bytes(p, static_cast<double>(elements)));
  // Each rank holds the slices that make up its range inside its host, and nothing else.
  for (int rank = 0; rank < p.ranks(); ++rank) {
    const int host = p.host_of_rank[rank];
    const ElementRange mine = local_range(p.local_index(rank), p.ranks_on(host), elements, granule);
    const auto held = map.slices_of(rank);
    ASSERT_FALSE(held.empty());
    for (std::size_t k = 0; k + 1 < held.size(); ++k) EXPECT_EQ(held[k] + 1, held[k + 1]);
    EXPECT_EQ(map.elements_of(held.front(), elements, granule).begin, mine.begin);
    EXPECT_EQ(map.elements_of(held.back(), elements, granule).end, mine.end);
  }
  // A host's ranks split it evenly (to a granule).
  for (int h = 0; h < p.hosts(); ++h)
    for (int j = 0; j < p.ranks_on(h); ++j) {
      const double share = static_cast<double>(elements) / p.ranks_on(h);
      EXPECT_LE(std::abs(static_cast<double>(local_range(j, p.ranks_on(h), elements, granule).size()) - share), 2.0 * granule);
    }
}

TEST(Hierarchy, PlacementNumbersHostsByTheirLowestRank) {
  const Placement p = placement_from_names({"b", "a", "b", "c", "a"});
  EXPECT_EQ(p.hosts(), 3);
  EXPECT_EQ(p.host_names, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(p.ranks_of_host[1], (std::vector<int>{1, 4}));
  EXPECT_EQ(p.local_index(4), 1);
  EXPECT_EQ(p.counts_text(), "2+2+1");
  EXPECT_EQ(placement_from_counts({3, 2}).host_of_rank, (std::vector<int>{0, 0, 0, 1, 1}));
}

TEST(Hierarchy, EvenPlacementOneSlicePerLocalRank) {
  const Placement p = placement_from_counts({2, 2});
  const SliceMap map = map_slices(p);
  ASSERT_EQ(map.slices.size(), 2u);
  EXPECT_EQ(map.slices[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(map.slices[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(map.slices_of(3), (std::vector<int>{1}));
  for (std::size_t n : {0ul, 1ul, 15ul, 1000ul, 1048576ul}) check_map(p, n, 16);
  check_map(placement_from_counts({2, 2, 2}), 12345, 1);
  check_map(placement_from_counts({8, 8, 8, 8}), 1 << 20, 16);
}

TEST(Hierarchy, UnevenPlacementCutsAtEveryHostsCuts) {
  // 3 + 2: cuts at 1/3, 1/2, 2/3: four slices; rank 1 (second of three) holds two of them.
  const Placement p = placement_from_counts({3, 2});
  const SliceMap map = map_slices(p);
  ASSERT_EQ(map.slices.size(), 4u);
  EXPECT_EQ(map.slices[0].ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(map.slices[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(map.slices[2].ranks, (std::vector<int>{1, 4}));
  EXPECT_EQ(map.slices[3].ranks, (std::vector<int>{2, 4}));
  EXPECT_TRUE(map.slices[1].end == (BufferPoint{1, 2}));
  const ElementRange middle = map.elements_of(1, 1200, 1);
  EXPECT_EQ(middle.begin, 400u);
  EXPECT_EQ(middle.end, 600u);
  for (std::size_t n : {0ul, 5ul, 17ul, 4096ul, 1000003ul}) check_map(p, n, 16);
  for (std::size_t n : {7ul, 1000ul}) check_map(placement_from_counts({3, 2, 2}), n, 1);
  check_map(placement_from_counts({8, 7, 5}), 1 << 20, 16);
  // Interleaved (round-robin) placement: hosts by lowest rank, holders from each host's own list.
  const Placement rr = placement_from_names({"x", "y", "x", "y", "x"});
  EXPECT_EQ(map_slices(rr).slices[0].ranks, (std::vector<int>{0, 1}));
  check_map(rr, 999, 4);
}

TEST(Hierarchy, HostWithOneRankHoldsEverySlice) {
  const Placement p = placement_from_counts({4, 1});
  const SliceMap map = map_slices(p);
  ASSERT_EQ(map.slices.size(), 4u);
  EXPECT_EQ(map.slices_of(4), (std::vector<int>{0, 1, 2, 3}));
  check_map(p, 100000, 16);
  check_map(placement_from_counts({1, 3, 2}), 4099, 16);
}

// A call's cuts fall on 64-byte lines of its own elements (16 float32, 32 of 16 bits): whole
// elements, and no line of the host's result area written by two local ranks.
TEST(Hierarchy, CutsFallOnCacheLinesOfTheCallsFormat) {
  for (ElementFormat f : {ElementFormat::float32, ElementFormat::float16, ElementFormat::bfloat16}) {
    const std::size_t granule = host_granule(f);
    EXPECT_EQ(granule * element_bytes(f), 64u) << to_string(f);
    for (std::size_t n : {1ul, 31ul, 10007ul, 1048577ul}) check_map(placement_from_counts({3, 2}), n, granule);
    check_map(placement_from_counts({8, 7, 5}), 1 << 20, granule);
    check_map(placement_from_counts({1, 3, 2}), 4099, granule);
  }
}

TEST(Hierarchy, ShapeAutoPicksThreeStagesOnlyWhereTheyPay) {
  EXPECT_FALSE(choose_shape(placement_from_counts({1}), HierarchyMode::automatic).hierarchical);
  const ShapeChoice one_host = choose_shape(placement_from_counts({4}), HierarchyMode::automatic);
  EXPECT_FALSE(one_host.hierarchical);
  EXPECT_NE(one_host.reason.find("one host"), std::string::npos);
  const ShapeChoice spread = choose_shape(placement_from_counts({1, 1, 1, 1}), HierarchyMode::automatic);
  EXPECT_FALSE(spread.hierarchical);
  EXPECT_NE(spread.reason.find("one rank per host"), std::string::npos);
  EXPECT_FALSE(choose_shape(placement_from_counts({2, 2}), HierarchyMode::off).hierarchical);
  const ShapeChoice two_by_two = choose_shape(placement_from_counts({2, 2}), HierarchyMode::automatic);
  EXPECT_TRUE(two_by_two.hierarchical);
  EXPECT_NE(two_by_two.reason.find("carries 1.00 x B out and as much in per call of B bytes (the flat TAR: up to 2.00 x B)"), std::string::npos) << two_by_two.reason;
  EXPECT_TRUE(choose_shape(placement_from_counts({2, 1}), HierarchyMode::automatic).hierarchical);
  EXPECT_TRUE(choose_shape(placement_from_counts({3, 2, 2}), HierarchyMode::automatic).hierarchical);
  // The figures: 2 hosts x 2 ranks, 4 MiB: the flat TAR puts 8 MiB on each link, the
  // three stages 4 MiB.
  const double mib = 1 << 20;
  EXPECT_DOUBLE_EQ(flat_link_bytes(placement_from_counts({2, 2}), 0, 4 * mib), 8 * mib);
  EXPECT_DOUBLE_EQ(hierarchical_link_bytes(placement_from_counts({2, 2}), 4 * mib), 4 * mib);
  EXPECT_DOUBLE_EQ(flat_link_bytes(placement_from_counts({1, 1, 1, 1}), 2, 4 * mib), 6 * mib);
}

TEST(Hierarchy, SettingIsParsedAndAgreed) {
  auto r = parse_config({{"OPTIREDUCE_HIERARCHY", "off"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.config.hierarchy, HierarchyMode::off);
  EXPECT_EQ(engine_options(r.config, false).hierarchy, HierarchyMode::off);
  EXPECT_EQ(parse_config({}).config.hierarchy, HierarchyMode::automatic);
  EXPECT_NE(r.config.agreement_text(), parse_config({}).config.agreement_text());
  auto bad = parse_config({{"OPTIREDUCE_HIERARCHY", "on"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("accepted: auto, off"), std::string::npos) << bad.error;
}

}  // namespace
}  // namespace optireduce
