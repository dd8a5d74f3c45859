// One engine per communicator: its ranks, its transport, its buffers, its deadlines. One
// operation: reduce a float buffer (sum) with the Transpose AllReduce, exactly or within a
// deadline. It knows nothing of MPI.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aligned_allocator.hpp"
#include "bootstrap.hpp"
#include "deadline_controller.hpp"
#include "hadamard.hpp"
#include "hadamard_worker.hpp"
#include "optireduce/transport.hpp"
#include "shard_layout.hpp"
#include "wire_header.hpp"

namespace optireduce {

// What a rank writes for an all-gather chunk that never arrived.
enum class FillPolicy { zero, local };

// When bounded calls run in the randomized Hadamard domain (hadamard.hpp).
enum class HadamardMode { off, on, automatic };  // automatic: while the communicator loses data

// Test and benchmark faults; they act on bounded calls only (exact calls are exact by definition).
struct FaultOptions {
  double drop = 0;              // probability that a received chunk is discarded
  int delay_rank = -1;          // this rank enters bounded calls late...
  double delay_ms = 0;          // ...by this much...
  double delay_probability = 0; // ...with this probability per call
  std::uint64_t seed = 1;
};

struct EngineOptions {
  std::uint32_t chunk_elems = 65536;
  std::chrono::milliseconds timeout{60000};  // hard cap on one call, and on connecting
  unsigned calibration_calls = 20;           // exact calls per size class before deadlines apply
  double loss_budget = 0.10;                 // beyond it: the next calls run exactly for a while
  unsigned reliable_calls_after_overrun = 16;  // two agreement windows
  unsigned sync_interval = 8;                // bounded calls between two agreement rounds
  FillPolicy fill = FillPolicy::zero;
  // Bounded calls end with the ranks exchanging which all-gather chunks they lack, so every rank
  // fills the union alike and results stay identical (zero fill only: a local fill differs by
  // rank by nature).
  bool agree_fill = true;
  HadamardMode hadamard = HadamardMode::automatic;
  unsigned hadamard_block_log2 = 12;
  // Encode and decode on a second thread while this one drives the network: for hosts where a
  // core is free (the caller decides; results are the same either way).
  bool hadamard_overlap = false;
  FaultOptions faults;
};

enum class CallStatus { ok, timeout, transport_error, broken };
const char* to_string(CallStatus s);

// Why a call ran the way it did.
enum class CallKind { exact, calibration, bounded, fallback };
const char* to_string(CallKind k);

struct CallStats {
  CallStatus status = CallStatus::ok;
  CallKind kind = CallKind::exact;
  std::uint64_t sequence = 0;         // call number on this communicator, from 1
  std::uint64_t entries = 0;          // result entries
  std::uint64_t dropped_entries = 0;  // entries that lacked a contribution or arrived nowhere
  std::uint64_t filled_entries = 0;   // of those, all-gather entries this rank had to fill in
  bool transformed = false;           // ran in the Hadamard domain
  bool fill_agreed = false;           // every rank's missing chunks were known here: same fill
  double latency_us = 0;
  std::array<double, kTarPhases> deadline_us{};  // budget of each phase (0 for exact calls)
  std::array<double, kTarPhases> phase_us{};     // time each phase took
};

// Messages the engine refused, by reason. Never trusted, always counted.
struct RejectCounts {
  std::uint64_t malformed = 0;   // header failed to decode
  std::uint64_t foreign = 0;     // other communicator or job, or an impossible source rank
  std::uint64_t stale = 0;       // a call that is already over, or a chunk already closed
  std::uint64_t misplaced = 0;   // extent or payload length not a chunk this rank expects
  std::uint64_t duplicate = 0;   // a chunk that was already received
  std::uint64_t overflow = 0;    // early data beyond the bounded early store
  std::uint64_t total() const { return malformed + foreign + stale + misplaced + duplicate + overflow; }
};

// What every rank agreed on at the agreement rounds.
struct AgreedCounts {
  std::uint64_t divergent_calls = 0;  // calls where some rank filled all-gather chunks
  std::uint64_t fallbacks = 0;        // times the loss budget sent the communicator to exact
  std::uint64_t injected_drops = 0;   // chunks discarded by OPTIREDUCE_FAULT_DROP (this rank)
  std::uint64_t fill_agreement_incomplete = 0;  // bounded calls that filled without every rank's list (this rank)
};

class Engine {
 public:
  // Collective over the bootstrap's ranks. `transport` is null when this rank could not create
  // one; then, as on any failure of any rank, every rank gets nullptr and `error` says why. The
  // engine keeps the bootstrap for its agreement rounds.
  static std::unique_ptr<Engine> create(int rank, int ranks, std::unique_ptr<Transport> transport,
                                        std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options,
                                        std::string& error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // output[i] = sum over ranks of input[i]. input may equal output (in place). Reads input and
  // writes output only while the call runs. `bounded` allows deadlines (once calibrated and
  // unless the loss budget says otherwise); every rank must pass the same value.
  CallStats allreduce_sum(const float* input, float* output, std::uint64_t count, bool bounded = false);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  std::uint64_t comm_id() const { return comm_id_; }
  // Bytes of the engine's own reusable buffers (staging and receive slots).
  std::size_t buffer_bytes() const;
  std::size_t largest_call_bytes() const { return largest_call_bytes_; }
  const RejectCounts& rejects() const { return rejects_; }
  const AgreedCounts& agreed() const { return agreed_; }
  const CallStats& last_call() const { return last_call_; }
  const Transport& transport() const { return *transport_; }

 private:
  Engine(int rank, int ranks, std::uint64_t comm_id, std::unique_ptr<Transport> transport,
         std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options);

  struct EarlyMessage {
    WireHeader header;
    std::vector<std::byte> payload;
  };
  // Staging memory of one call: its input (then its reduced shard) and the headers of its sends.
  // Sends may outlive a bounded call (a TCP retransmission stalls one peer's queue for 200 ms),
  // so bounded calls take any buffer whose sends have all completed, adding one (up to
  // kMaxStaging) rather than waiting for a stalled peer; exact calls use the first.
  struct Staging {
    std::vector<float, AlignedAllocator<float>> data;
    std::vector<std::array<std::byte, WireHeader::kEncodedSize>> headers;
    std::vector<std::uint64_t> posted_until;  // per peer: the send count once its call posted
    std::vector<std::byte> missing;           // bitmap of the all-gather chunks this rank lacked
  };
  using PayloadReader = std::function<bool(std::span<std::byte>)>;

  CallKind choose_kind(unsigned cls) const;
  // One Transpose AllReduce over the transport. `probe`: a timing run of the datagram path on
  // the data of an exact call (whose result comes from the bootstrap), within that budget.
  CallStats tar_call(const float* input, float* output, std::uint64_t count, CallStats stats, Clock::time_point start,
                     unsigned cls, const PhaseDeadlines* probe);
  // Exact calls when the transport may lose data: the bootstrap's exact sum, then (calibration
  // and fallback calls) a probe that teaches the deadlines.
  CallStats exact_over_bootstrap(const float* input, float* output, std::uint64_t count, CallStats stats,
                                 Clock::time_point start, unsigned cls);
  bool staging_free(const Staging& s) const;
  TransportStatus wait_until(Clock::time_point deadline, const std::function<bool()>& done, bool give_up_quietly);
  void begin_call(Staging& staging, float* output, std::uint64_t count);
  void on_message(const InboundMessage& message);
  void apply(const WireHeader& h, std::size_t payload_size, const PayloadReader& receive);
  void note_stamps(const WireHeader& h);
  void reduce_chunk(std::uint32_t chunk);
  void close_scatter_phase();
  void fill_missing_gather_chunks();
  // Tells every peer which all-gather chunks this rank lacks, waits (until `deadline`) for
  // theirs, and closes the union of them on this rank too. True when every list came.
  bool agree_on_missing(Clock::time_point deadline);
  void apply_missing(const WireHeader& h, std::size_t payload_size, const PayloadReader& receive);
  std::uint64_t global_chunk(int owner, std::uint32_t chunk) const { return chunk_base_[owner] + chunk; }
  // Hadamard calls: encodes shard p of the input into staging; decodes shard p from staging into
  // the caller's buffer, once (again only if the fill agreement changed it afterwards).
  HadamardOptions hadamard_options() const;
  std::uint64_t shard_seed(int p) const;
  void encode_shard(const float* input, int p);
  void decode_shard(int p);
  void decode_into_output(int p) const;
  // With the worker: queue shard p's decode now that its data is final; wait for its encode.
  void start_decode(int p);
  void await_encoded(int p);
  // Where the all-gather of this call lands: the caller's buffer, or staging when the call runs
  // in the Hadamard domain (decoded into the caller's buffer at the end).
  float* gather_target() const { return transformed_ ? current_->data.data() : output_; }
  TransportStatus send_chunk(int peer, Phase phase, const Extent& extent, std::uint16_t flags);
  bool own_shard_reduced() const { return reduced_chunks_ == layout_.chunks_in_shard(rank_); }
  bool peers_served() const;
  void agree_after_bounded_call(const CallStats& call);
  // Feeds an exact call's phase times to the deadlines; when that completes a (re)calibration,
  // makes the new bounds tB the same on every rank (collective at that call).
  void record_calibration(unsigned cls, const std::array<double, kTarPhases>& phase_us);
  CallStats fail(CallStats stats, TransportStatus ts, Clock::time_point start, std::uint64_t count);

  const int rank_;
  const int ranks_;
  const std::uint64_t comm_id_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Bootstrap> bootstrap_;
  const EngineOptions options_;
  DeadlineController deadlines_;
  bool broken_ = false;

  std::uint64_t calls_ = 0;  // calls on this communicator (what loss-budget decisions count)
  std::uint64_t epoch_ = 0;  // Transpose AllReduce runs over the transport (the wire's sequence)
  std::uint32_t chunk_elems_ = 0;  // options' chunk, cut to what one message of the transport holds
  std::uint32_t last_slices_ = 1;  // final messages of a phase flagged "last slice" (tar_schedule.hpp)
  bool probing_ = false;
  std::vector<float> probe_input_, probe_output_;  // probes of in-place calls, and their results
  double paced_bytes_per_s_ = 0;  // suggested to the transport after calibration
  std::map<unsigned, double> fastest_exact_us_;  // per size class: the quickest exact call (probe budgets)
  std::size_t largest_call_bytes_ = 0;

  static constexpr std::size_t kMaxStaging = 4;
  std::vector<std::unique_ptr<Staging>> staging_;
  Staging& pick_staging(bool bounded, Clock::time_point deadline, TransportStatus& ts);
  Staging* current_ = nullptr;
  const float* scatter_source_ = nullptr;  // staging, or the caller's input in exact calls
  std::size_t headers_used_ = 0;  // header slots of current_ handed out this call
  std::vector<float> slots_;  // other ranks' contributions to this rank's shard, one stride each
  std::vector<std::uint64_t> posted_;  // per peer: sends posted so far

  // State of the call in progress.
  ShardLayout layout_;
  bool in_call_ = false;  // a call is running: its messages may land
  bool bounded_call_ = false;
  bool transformed_ = false;
  bool hadamard_active_ = false;  // automatic mode: agreed at the last round
  float* output_ = nullptr;
  std::uint64_t slot_stride_ = 0;
  std::vector<std::uint16_t> contributors_;         // per chunk of the own shard
  std::vector<std::uint8_t> scatter_seen_;          // [source][chunk of own shard]
  std::vector<std::uint8_t> gather_seen_;           // [owner][chunk], stride max_chunks
  std::vector<std::uint8_t> last_slice_seen_;       // [phase][source]
  std::vector<std::uint8_t> done_from_;             // peers that said they have all our data
  std::vector<std::uint32_t> ready_;                // own chunks with every contribution
  std::uint32_t reduced_chunks_ = 0;
  std::uint64_t scatter_received_ = 0;              // chunks received in each phase
  std::uint64_t scatter_expected_ = 0;
  std::uint64_t gather_remaining_ = 0;
  std::uint64_t gather_expected_ = 0;
  std::vector<std::uint8_t> decoded_;               // shards decoded or queued for it (Hadamard calls)
  std::vector<HadamardWorker::Ticket> encoded_;     // per shard: its encode job (0: done)
  std::vector<std::uint32_t> gather_pending_;       // per shard: all-gather chunks still to come
  std::vector<std::uint64_t> chunk_base_;           // per owner: global index of its first chunk
  std::size_t missing_bytes_ = 0;                   // bytes of a missing-chunk bitmap
  std::size_t missing_piece_bytes_ = 0;             // bytes of one missing message
  std::vector<std::byte> union_missing_;            // OR of the bitmaps that came this call
  std::vector<std::uint8_t> counted_;               // [global chunk]: already counted as dropped
  std::vector<std::uint8_t> missing_pieces_;        // [source][piece]: pieces that came
  std::size_t missing_pieces_per_rank_ = 0;
  std::size_t missing_complete_ = 0;                // sources whose whole bitmap came
  std::uint64_t dropped_entries_ = 0;
  std::uint64_t filled_entries_ = 0;
  std::array<Clock::time_point, kTarPhases> last_arrival_{};  // latest chunk applied per phase
  std::array<std::vector<float>, kTarPhases> stamps_;  // first stamp of each sender this call
  std::vector<std::uint8_t> stamped_;                  // [phase][source]

  // This rank's latest phase estimates (stamped into its messages).
  std::array<float, kTarPhases> my_estimate_us_{};

  // Agreement: what every rank reported at the last rounds.
  std::uint64_t reliable_until_ = 0;   // calls up to this sequence number run exactly
  unsigned bounded_since_agreement_ = 0;
  bool agreement_pending_ = false;  // an agreement all-gather was started and not yet finished
  std::uint64_t window_entries_ = 0, window_dropped_ = 0, window_filled_calls_ = 0;
  double window_worst_call_loss_ = 0;
  AgreedCounts agreed_;
  CallStats last_call_;

  std::mt19937_64 fault_rng_;
  std::vector<EarlyMessage> early_;
  std::size_t early_bytes_ = 0;
  RejectCounts rejects_;
  // Last, so it is joined before anything its jobs touch goes away (it is idle between calls).
  std::unique_ptr<HadamardWorker> worker_;
};

}  // namespace optireduce
