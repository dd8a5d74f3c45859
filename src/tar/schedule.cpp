#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

std::vector<int> shard_send_order(int rank, int ranks) {
  std::vector<int> order;
  for (int k = 1; k < ranks; ++k) order.push_back(rotation_peer(rank, ranks, k));
  order.push_back(rank);
  return order;
}

}  // namespace optireduce
