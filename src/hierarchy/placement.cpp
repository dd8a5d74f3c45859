#include "optireduce/engine/hierarchy/placement.hpp"

#include <algorithm>
#include <map>

namespace optireduce {

int Placement::local_index(int rank) const {
  const auto& mates = ranks_of_host[host_of_rank[rank]];
  return static_cast<int>(std::find(mates.begin(), mates.end(), rank) - mates.begin());
}

std::string Placement::counts_text() const {
  std::string text;
  for (int h = 0; h < hosts(); ++h) text += (h ? "+" : "") + std::to_string(ranks_on(h));
  return text;
}

Placement placement_from_names(const std::vector<std::string>& names) {
  Placement p;
  std::map<std::string, int> number;
  for (int rank = 0; rank < static_cast<int>(names.size()); ++rank) {
    const auto [at, added] = number.emplace(names[rank], p.hosts());
    if (added) {
      p.ranks_of_host.emplace_back();
      p.host_names.push_back(names[rank]);
    }
    p.host_of_rank.push_back(at->second);
    p.ranks_of_host[at->second].push_back(rank);
  }
  return p;
}

Placement placement_from_counts(const std::vector<int>& ranks_per_host) {
  std::vector<std::string> names;
  for (std::size_t h = 0; h < ranks_per_host.size(); ++h)
    for (int k = 0; k < ranks_per_host[h]; ++k) names.push_back("h" + std::to_string(h));
  return placement_from_names(names);
}

}  // namespace optireduce
