#include "optireduce/ucx/ucx_context.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <vector>

#include "optireduce/log.hpp"

namespace optireduce::ucx {
namespace {

std::mutex g_mutex;
std::weak_ptr<SharedContext> g_context;

// UCX's TCP transport cuts every message into 8 KiB segments and reassembles them in a buffer of
// its own; one segment per chunk saves that copy and its CPU. Set through the engine's own UCX
// config: ucp_config_modify keeps keys it does not know and applies them, relative to each
// transport's table ("TX_SEG_SIZE", not "TCP_TX_SEG_SIZE"; only tcp has these two), to the
// interfaces it opens. A user's setting wins.
constexpr std::size_t kSegmentOverhead = 8u << 10;  // UCX's AM and TCP headers
constexpr std::size_t kLargestSegment = 1u << 20;   // above this UCX's receive buffers cost too much

// Whether the engine's UCX may open tcp: UCX warns of settings no transport took ("invalid
// configurations: TX_SEG_SIZE=...") when the transports are held to shared memory.
bool tcp_allowed() {
  const char* tls = std::getenv((std::string(kEnvPrefix) + "_UCX_TLS").c_str());
  if (!tls) tls = std::getenv("UCX_TLS");
  if (!tls || !*tls || tls[0] == '^') return true;
  const std::string list(tls);
  return list.find("tcp") != std::string::npos || list.find("all") != std::string::npos;
}

void size_tcp_segments(ucp_config_t* config, std::size_t chunk_bytes) {
  if (!tcp_allowed()) return;
  const std::string bytes = std::to_string(std::min(chunk_bytes, kLargestSegment) + kSegmentOverhead);
  for (const char* key : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {
    const std::string plain = std::string("UCX_TCP_") + key, prefixed = std::string(kEnvPrefix) + "_" + plain;
    if (std::getenv(plain.c_str()) || std::getenv(prefixed.c_str())) continue;
    if (ucp_config_modify(config, key, bytes.c_str()) != UCS_OK) OR_LOG(debug, "UCX refused %s=%s", key, bytes.c_str());
  }
}

// Whether the user chose UCX's rendezvous threshold for the engine.
bool user_sets_rndv_thresh() {
  return std::getenv("UCX_RNDV_THRESH") || std::getenv((std::string(kEnvPrefix) + "_UCX_RNDV_THRESH").c_str());
}

// Engine messages go eagerly by default: every send carries UCP_AM_SEND_FLAG_EAGER (which alone
// decides it: UCX 1.13 then ignores RNDV_THRESH for active messages), and RNDV_THRESH=inf keeps
// UCX's own protocol choice the same. Eager keeps every transfer a push that needs no round trip
// between ranks sharing cores. (The deadlock of mpi.buckets.np3 first blamed on rendezvous over
// cma was a missed wake-up in UcxTransport::poll, and happened eagerly as well.) A user's
// RNDV_THRESH wins, and then the sends leave the choice to UCX.
void keep_messages_eager(ucp_config_t* config) {
  if (user_sets_rndv_thresh()) return;
  if (ucp_config_modify(config, "RNDV_THRESH", "inf") != UCS_OK) OR_LOG(debug, "UCX refused RNDV_THRESH=inf");
}

ucp_params_t context_params() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "optireduce";
  params.mt_workers_shared = 1;  // communicators may be driven from different threads
  return params;
}

}  // namespace

SharedContext::~SharedContext() {
  if (context_) ucp_cleanup(context_);
}

std::shared_ptr<SharedContext> acquire_context(std::size_t chunk_bytes, Status& status) {
  std::lock_guard lock(g_mutex);
  if (auto existing = g_context.lock()) return existing;
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(kEnvPrefix, nullptr, &config);
  if (st != UCS_OK) {
    status = Unavailable(std::string("ucp_config_read: ") + ucs_status_string(st));
    return nullptr;
  }
  size_tcp_segments(config, chunk_bytes);
  keep_messages_eager(config);
  auto context = std::shared_ptr<SharedContext>(new SharedContext);
  const ucp_params_t params = context_params();
  st = ucp_init(&params, config, &context->context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    status = Unavailable(std::string("ucp_init: ") + ucs_status_string(st));
    return nullptr;
  }
  context->eager_only_ = !user_sets_rndv_thresh();
  g_context = context;
  return context;
}

std::vector<std::string> available_transports() {
  std::vector<std::string> out;
  Status status;
  auto context = acquire_context(256u << 10, status);
  if (!context) return out;
  char* text = nullptr;
  std::size_t size = 0;
  if (FILE* stream = open_memstream(&text, &size)) {
    ucp_context_print_info(context->handle(), stream);
    std::fclose(stream);
    const std::string info(text, size);
    std::free(text);
    // Lines look like "#      resource 3  :  md 1  dev 1  flags -- tcp/lo".
    static const std::regex res(R"(resource\s+\d+\s*:.*\s([a-z][a-z0-9_]*/[A-Za-z0-9_.:\-]+))");
    for (std::sregex_iterator it(info.begin(), info.end(), res), end; it != end; ++it) out.push_back((*it)[1]);
  }
  return out;
}

}  // namespace optireduce::ucx
