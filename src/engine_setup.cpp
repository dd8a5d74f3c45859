// Creating an engine: which transports carry which calls, their addresses exchanged over the
// bootstrap, connected, and every step agreed by all ranks.
#include <unistd.h>

#include <cstring>
#include <random>

#include "optireduce/engine/engine.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/transport_loader.hpp"

namespace optireduce {
namespace {

std::uint64_t random_nonce() {
  std::random_device device;
  std::uint64_t n = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  n ^= static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  return n ? n : 1;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Every rank contributes whether it succeeded (and why not); all agree on failure if any failed.
Status all_ranks_ok(Bootstrap& bootstrap, const Status& mine, const std::string& what) {
  const std::string text = mine.ok() ? std::string() : mine.text();
  std::vector<std::byte> blob(1 + text.size());
  blob[0] = std::byte{static_cast<unsigned char>(mine.ok() ? 1 : 0)};
  std::memcpy(blob.data() + 1, text.data(), text.size());
  const auto all = bootstrap.allgather(blob);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].empty() || all[r][0] != std::byte{1}) {
      const std::string why(reinterpret_cast<const char*>(all[r].data()) + (all[r].empty() ? 0 : 1),
                            all[r].empty() ? 0 : all[r].size() - 1);
      return PeerError("rank " + std::to_string(r) + " " + what + (why.empty() ? "" : ": " + why));
    }
  return {};
}

// Collective: every rank's address of its transport (null: it has none), then connect. Ok on
// every rank or on none.
Status exchange_and_connect(int rank, int ranks, Transport* transport, Bootstrap& bootstrap, Clock::time_point deadline,
                            const std::string& what) {
  std::vector<std::byte> blob(1, std::byte{static_cast<unsigned char>(transport ? 1 : 0)});
  if (transport) {
    const auto address = transport->local_address();
    blob.insert(blob.end(), address.begin(), address.end());
  }
  const auto blobs = bootstrap.allgather(blob);
  std::vector<std::vector<std::byte>> addresses(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    if (blobs[r].empty() || blobs[r][0] != std::byte{1})
      return Unavailable("rank " + std::to_string(r) + " could not create its " + what + " transport");
    addresses[r].assign(blobs[r].begin() + 1, blobs[r].end());
  }
  return all_ranks_ok(bootstrap, transport->connect(rank, addresses, deadline), "could not connect its " + what + " transport");
}

// Which module carries bounded calls; empty: the exact transport does. Ranks share a host when
// their host names match (so a one-host emulation of a network must name its transport).
std::string bounded_module(TransportKind kind, bool one_host) {
  switch (kind) {
    case TransportKind::ucx: return {};
    case TransportKind::automatic: return one_host ? std::string() : "udp";
    case TransportKind::udp: return "udp";
    case TransportKind::ofi: return "ofi";
  }
  return {};
}

std::unique_ptr<Transport> make(const std::string& module, const EngineOptions& options) {
  Status made;
  auto transport = create_transport(module, options.transport_settings, made);
  if (!transport) OR_LOG(info, "cannot start the %s transport: %s", module.c_str(), made.text().c_str());
  return transport;
}

}  // namespace

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Bootstrap> bootstrap,
                                       const EngineOptions& options, Status& status) {
  // Whether every rank is on this host decides what `auto` picks; every rank sees every name.
  const std::string mine = host_name();
  const auto names = bootstrap->allgather({reinterpret_cast<const std::byte*>(mine.data()), mine.size()});
  bool one_host = true;
  for (const auto& n : names) one_host = one_host && std::string(reinterpret_cast<const char*>(n.data()), n.size()) == mine;
  const std::string bounded = options.bounded_calls ? bounded_module(options.transport, one_host) : std::string();
  auto exact = make("ucx", options);
  return create(rank, ranks, std::move(exact), bounded.empty() ? nullptr : make(bounded, options), std::move(bootstrap),
                options, status);
}

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Transport> exact,
                                       std::unique_ptr<Transport> bounded, std::unique_ptr<Bootstrap> bootstrap,
                                       const EngineOptions& options, Status& status) {
  // A lone transport that may lose data carries the bounded calls; the bootstrap the exact ones.
  if (exact && !bounded && !exact->traits().reliable) std::swap(exact, bounded);
  const std::uint64_t nonce = random_nonce();
  const auto nonces = bootstrap->allgather({reinterpret_cast<const std::byte*>(&nonce), sizeof nonce});
  std::uint64_t comm_id = 0;
  if (nonces[0].size() == sizeof comm_id) std::memcpy(&comm_id, nonces[0].data(), sizeof comm_id);
  const auto deadline = Clock::now() + options.watchdog;
  // Whether a rank passed a transport at all is the same on every rank (same options), so each
  // exchange below is collective.
  const bool wants_exact = [&] {
    const std::byte has{static_cast<unsigned char>(exact ? 1 : 0)};
    for (const auto& b : bootstrap->allgather({&has, 1}))
      if (!b.empty() && b[0] == std::byte{1}) return true;
    return false;
  }();
  Paths paths;
  Status exact_status = Unavailable("no exact transport");
  if (wants_exact) {
    exact_status = exchange_and_connect(rank, ranks, exact.get(), *bootstrap, deadline, "exact");
    if (exact_status.ok()) paths.exact = std::make_unique<TransportPath>(std::move(exact), "ucx", rank, ranks);
  }
  const bool wants_bounded = [&] {
    const std::byte has{static_cast<unsigned char>(bounded ? 1 : 0)};
    for (const auto& b : bootstrap->allgather({&has, 1}))
      if (!b.empty() && b[0] == std::byte{1}) return true;
    return false;
  }();
  if (wants_bounded) {
    const std::string name = options.transport == TransportKind::ofi ? "ofi" : "udp";
    const Status st = exchange_and_connect(rank, ranks, bounded.get(), *bootstrap, deadline, name);
    if (st.ok()) paths.bounded = std::make_unique<TransportPath>(std::move(bounded), name, rank, ranks);
    else if (rank == 0) OR_LOG(warn, "bounded calls go over UCX, not %s: %s", name.c_str(), st.text().c_str());
  }
  if (!paths.exact && !paths.bounded) {
    status = exact_status;
    return nullptr;
  }
  if (!paths.exact && wants_exact && rank == 0)
    OR_LOG(warn, "exact calls go over the job's MPI: %s", exact_status.text().c_str());
  // The MPI's allreduce is measured against the engine's only where nothing but this host's
  // memory is in between, and no test asks for the engine's faults.
  const bool aside = options.step_aside && !options.faults.any() && paths.exact && !paths.bounded &&
                     paths.exact->transport->traits().shared_memory;
  bool all_aside = true;
  const std::byte flag{static_cast<unsigned char>(aside ? 1 : 0)};
  for (const auto& b : bootstrap->allgather({&flag, 1})) all_aside = all_aside && !b.empty() && b[0] == std::byte{1};
  auto engine = std::unique_ptr<Engine>(new Engine(rank, ranks, comm_id, std::move(paths), std::move(bootstrap), options));
  engine->step_aside_ = StepAside(all_aside, rank);
  return engine;
}

}  // namespace optireduce
