#include "optireduce/engine/hierarchy/slice_map.hpp"

#include <algorithm>

namespace optireduce {

std::vector<int> SliceMap::slices_of(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < static_cast<int>(slices.size()); ++s)
    if (std::find(slices[s].ranks.begin(), slices[s].ranks.end(), rank) != slices[s].ranks.end()) out.push_back(s);
  return out;
}

ElementRange SliceMap::elements_of(int slice, std::size_t elements, std::size_t granule) const {
  return {slices[slice].begin.element(elements, granule), slices[slice].end.element(elements, granule)};
}

SliceMap map_slices(const Placement& placement) {
  std::vector<BufferPoint> cuts;
  for (int h = 0; h < placement.hosts(); ++h)
    for (int k = 0; k <= placement.ranks_on(h); ++k) cuts.push_back({k, placement.ranks_on(h)});
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  SliceMap map;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    SliceExchange slice{cuts[i], cuts[i + 1], {}};
    // The range of host h that holds the slice's start holds the whole slice: no cut of h lies
    // strictly inside it.
    for (int h = 0; h < placement.hosts(); ++h)
      slice.ranks.push_back(placement.ranks_of_host[h][cuts[i].part_of(placement.ranks_on(h))]);
    map.slices.push_back(std::move(slice));
  }
  return map;
}

ElementRange local_range(int local_index, int local_ranks, std::size_t elements, std::size_t granule) {
  return {BufferPoint{local_index, local_ranks}.element(elements, granule),
          BufferPoint{local_index + 1, local_ranks}.element(elements, granule)};
}

}  // namespace optireduce
