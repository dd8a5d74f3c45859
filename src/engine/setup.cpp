// Creating an engine: which transports carry which calls, their addresses exchanged over the
// bootstrap, connected, and every step agreed by all ranks.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <span>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/engine/transport_loader.hpp"
#include "optireduce/engine/hierarchy/shape.hpp"
#include "optireduce/engine/report/topology.hpp"

namespace optireduce {
namespace {

std::uint64_t random_nonce() {
  std::random_device device;
  std::uint64_t n = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  n ^= static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  return n ? n : 1;
}

// What a rank brings to an engine: a nonce (rank 0's becomes the communicator's id) and the
// address of each transport it could create (none: it could not).
struct Offer {
  std::uint64_t nonce = 0;
  std::optional<std::vector<std::byte>> exact, bounded;
};

std::optional<std::vector<std::byte>> address_of(const Transport* transport) {
  if (!transport) return std::nullopt;
  return transport->local_address();
}

// A field: [present u8][length u32][bytes].
void put_field(std::vector<std::byte>& blob, bool present, std::span<const std::byte> bytes) {
  const std::size_t at = blob.size();
  blob.resize(at + 5 + bytes.size());
  ByteWriter(blob.data() + at).put<std::uint8_t>(present ? 1 : 0).put<std::uint32_t>(static_cast<std::uint32_t>(bytes.size()));
  if (!bytes.empty()) std::memcpy(blob.data() + at + 5, bytes.data(), bytes.size());
}

bool get_field(std::span<const std::byte> blob, std::size_t& at, bool& present, std::vector<std::byte>& bytes) {
  if (blob.size() < at + 5) return false;
  ByteReader r(blob.data() + at);
  present = r.get<std::uint8_t>() != 0;
  const std::uint32_t length = r.get<std::uint32_t>();
  if (blob.size() - at - 5 < length) return false;
  bytes.assign(blob.begin() + static_cast<std::ptrdiff_t>(at + 5), blob.begin() + static_cast<std::ptrdiff_t>(at + 5 + length));
  at += 5 + length;
  return true;
}

std::vector<std::byte> encode_offer(const Offer& o) {
  std::vector<std::byte> blob(8);
  put_le<std::uint64_t>(blob.data(), o.nonce);
  put_field(blob, o.exact.has_value(), o.exact ? std::span<const std::byte>(*o.exact) : std::span<const std::byte>());
  put_field(blob, o.bounded.has_value(), o.bounded ? std::span<const std::byte>(*o.bounded) : std::span<const std::byte>());
  return blob;
}

Status decode_offers(const std::vector<std::vector<std::byte>>& blobs, int ranks, std::vector<Offer>& offers) {
  offers.assign(static_cast<std::size_t>(ranks), {});
  for (int r = 0; r < ranks; ++r) {
    const std::span<const std::byte> b = r < static_cast<int>(blobs.size()) ? std::span<const std::byte>(blobs[r]) : std::span<const std::byte>();
    std::size_t at = 8;
    bool has_exact = false, has_bounded = false;
    std::vector<std::byte> exact, bounded;
    if (b.size() < 8 || !get_field(b, at, has_exact, exact) || !get_field(b, at, has_bounded, bounded) || at != b.size())
      return PeerError("rank " + std::to_string(r) + " sent a malformed description of its transports");
    offers[r].nonce = get_le<std::uint64_t>(b.data());
    if (has_exact) offers[r].exact = std::move(exact);
    if (has_bounded) offers[r].bounded = std::move(bounded);
  }
  return {};
}

// Collective: every rank's outcome of one step (and why not), plus one flag; all agree on failure
// if any failed, and `all_flags` is whether every rank's flag is set.
Status all_ranks_ok(Bootstrap& bootstrap, const Status& mine, const std::string& what, bool flag, bool* all_flags) {
  const std::string text = mine.ok() ? std::string() : mine.text();
  std::vector<std::byte> blob(1, std::byte{static_cast<unsigned char>(flag ? 1 : 0)});
  put_field(blob, mine.ok(), std::as_bytes(std::span<const char>(text.data(), text.size())));
  const auto all = bootstrap.allgather(blob);
  bool flags = true;
  Status verdict;
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::size_t at = 1;
    bool ok = false;
    std::vector<std::byte> why;
    if (all[r].empty() || !get_field(all[r], at, ok, why)) ok = false;
    flags = flags && !all[r].empty() && all[r][0] == std::byte{1};
    if (!ok && verdict.ok())
      verdict = PeerError("rank " + std::to_string(r) + " " + what +
                          (why.empty() ? "" : ": " + std::string(reinterpret_cast<const char*>(why.data()), why.size())));
  }
  *all_flags = flags;
  return verdict;
}

// Collective: connects the transport every rank offered an address of (none where one rank has
// none: Unavailable on every rank, no exchange), then agrees the outcome, with whether every
// rank's transport reaches its peers through shared memory alone.
Status connect_offered(int rank, const std::vector<Offer>& offers, std::optional<std::vector<std::byte>> Offer::*field,
                       Transport* transport, Bootstrap& bootstrap, Clock::time_point deadline, const std::string& what,
                       bool& all_shared_memory) {
  all_shared_memory = false;
  std::vector<std::vector<std::byte>> addresses(offers.size());
  for (std::size_t r = 0; r < offers.size(); ++r) {
    if (!(offers[r].*field)) return Unavailable("rank " + std::to_string(r) + " could not create its " + what + " transport");
    addresses[r] = *(offers[r].*field);
  }
  const Status connected = transport->connect(rank, addresses, deadline);
  return all_ranks_ok(bootstrap, connected, "could not connect its " + what + " transport",
                      connected.ok() && transport->traits().shared_memory, &all_shared_memory);
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
  const auto blobs = bootstrap->allgather({reinterpret_cast<const std::byte*>(mine.data()), mine.size()});
  std::vector<std::string> names;
  for (const auto& n : blobs) names.emplace_back(reinterpret_cast<const char*>(n.data()), n.size());
  const bool one_host = std::all_of(names.begin(), names.end(), [&](const std::string& n) { return n == mine; });
  const std::string bounded = options.bounded_calls ? bounded_module(options.transport, one_host) : std::string();
  auto exact = make("ucx", options);
  auto engine = create(rank, ranks, std::move(exact), bounded.empty() ? nullptr : make(bounded, options), std::move(bootstrap),
                       options, status);
  const Placement placement = placement_from_names(names);
  if (!engine || names.size() != static_cast<std::size_t>(ranks) || !choose_shape(placement, options.hierarchy).hierarchical)
    return engine;
  // Each slice's engine is an engine like this one over its holders, one per host: flat.
  EngineOptions flat = options;
  flat.hierarchy = HierarchyMode::off;
  const Status tiers = engine->enable_hierarchy(placement, [flat](int, int r, int n, std::unique_ptr<Bootstrap> b, Status& st) {
    return Engine::create(r, n, std::move(b), flat, st);
  });
  if (!tiers.ok() && rank == 0) OR_LOG(warn, "calls stay flat over %s: %s", placement.counts_text().c_str(), tiers.text().c_str());
  return engine;
}

Status Engine::enable_hierarchy(const Placement& placement, const HostTiers::MakeEngine& make) {
  Status status;
  // One exchange of a slice's engine: its watchdog, after a calibration run that took up to the
  // timeout and the lag of its exact rerun (Engine::calibrate_over_datagrams).
  const Clock::duration grace = state_.options.watchdog + state_.options.timeout + TarCall::longest_exchange_lag(state_.options);
  tiers_ = HostTiers::create(state_.rank, placement, state_.comm_id, *state_.bootstrap, make, state_.options.watchdog, grace,
                             status);
  return tiers_ ? Status{} : status;
}

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Transport> exact,
                                       std::unique_ptr<Transport> bounded, std::unique_ptr<Bootstrap> bootstrap,
                                       const EngineOptions& options, Status& status) {
  // A lone transport that may lose data carries the bounded calls; the bootstrap the exact ones.
  if (exact && !bounded && !exact->traits().reliable) std::swap(exact, bounded);
  // Few exchanges over the bootstrap: on a lossy network each all-gather may wait out a
  // retransmission timeout of the job's MPI. One of what every rank has (the communicator's id is
  // rank 0's nonce), one after connecting each transport.
  const Offer mine{random_nonce(), address_of(exact.get()), address_of(bounded.get())};
  std::vector<Offer> offers;
  if (Status st = decode_offers(bootstrap->allgather(encode_offer(mine)), ranks, offers); !st.ok()) {
    status = st;
    return nullptr;
  }
  const std::uint64_t comm_id = offers[0].nonce;
  const auto deadline = Clock::now() + options.watchdog;
  // Whether a rank has a transport at all is the same verdict on every rank (every rank sees every
  // offer), so each connect below is collective.
  auto wanted = [&](std::optional<std::vector<std::byte>> Offer::*field) {
    return std::any_of(offers.begin(), offers.end(), [&](const Offer& o) { return (o.*field).has_value(); });
  };
  const bool wants_exact = wanted(&Offer::exact), wants_bounded = wanted(&Offer::bounded);
  Paths paths;
  Status exact_status = Unavailable("no exact transport");
  bool all_shared_memory = false;  // of the exact transport: the step aside, below
  if (wants_exact) {
    exact_status = connect_offered(rank, offers, &Offer::exact, exact.get(), *bootstrap, deadline, "exact", all_shared_memory);
    if (exact_status.ok()) paths.exact = std::make_unique<TransportPath>(std::move(exact), "ucx", rank, ranks);
  }
  if (wants_bounded) {
    const std::string name = options.transport == TransportKind::ofi ? "ofi" : "udp";
    bool unused = false;
    const Status st = connect_offered(rank, offers, &Offer::bounded, bounded.get(), *bootstrap, deadline, name, unused);
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
  const bool all_aside = options.step_aside && !options.faults.any() && paths.exact && !paths.bounded && all_shared_memory;
  auto engine = std::unique_ptr<Engine>(new Engine(rank, ranks, comm_id, std::move(paths), std::move(bootstrap), options));
  engine->step_aside_ = StepAside(all_aside, rank);
  return engine;
}

}  // namespace optireduce
