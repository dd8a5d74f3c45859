// What a datagram transport does with each validated datagram: a hello feeds the handshake and is
// answered when its sender still needs to hear from us, a ping is answered with a pong at once,
// a pong confirms the flow window, data goes to the engine as a message viewing the receive
// buffer. Data that arrives while the engine is not listening (a peer already in its first call
// while this rank still connects) is kept, bounded, for the next poll().
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "dispatch.hpp"
#include "flow_window.hpp"
#include "handshake.hpp"
#include "optireduce/transport.hpp"

namespace optireduce::datagram {

// How the handler's answers (hello, pong) leave: at once, never behind data.
class ControlReplies {
 public:
  virtual ~ControlReplies() = default;
  virtual void reply(int peer, Kind kind, std::span<const std::byte> body) = 0;
};

class InboundHandler final : public DatagramSink {
 public:
  static constexpr std::size_t kMaxKeptBytes = 8u << 20;

  InboundHandler(Handshake& handshake, std::vector<FlowWindow>& windows, ControlReplies& replies)
      : handshake_(handshake), windows_(windows), replies_(replies) {}

  // The engine's callback while it polls; null otherwise.
  void listen(const std::function<void(const InboundMessage&)>* on_message) { on_message_ = on_message; }
  // Hands the kept data to the listening engine; returns how many messages.
  std::size_t deliver_kept();
  // Messages handed to the engine so far.
  std::size_t delivered() const { return delivered_; }

  void on_hello(int source, std::uint8_t flags) override;
  void on_ping(int source, std::uint64_t value) override;
  void on_pong(int source, std::uint64_t value) override;
  void on_data(int source, std::span<const std::byte> header, std::span<const std::byte> payload,
               Clock::time_point arrived) override;

 private:
  struct Kept {
    int source;
    std::vector<std::byte> bytes;  // header, then payload
    std::size_t header_bytes;
    Clock::time_point arrived;
  };
  void hand_over(int source, std::span<const std::byte> header, std::span<const std::byte> payload,
                 Clock::time_point arrived);

  Handshake& handshake_;
  std::vector<FlowWindow>& windows_;
  ControlReplies& replies_;
  const std::function<void(const InboundMessage&)>* on_message_ = nullptr;
  std::deque<Kept> kept_;
  std::size_t kept_bytes_ = 0;
  std::size_t delivered_ = 0;
};

// For the length of a transport's poll(): what the handler delivers goes to `on_message`, and to
// nobody once the poll returned (however it returns).
class ListeningScope {
 public:
  ListeningScope(InboundHandler& inbound, const std::function<void(const InboundMessage&)>& on_message)
      : inbound_(inbound) {
    inbound_.listen(&on_message);
  }
  ~ListeningScope() { inbound_.listen(nullptr); }
  ListeningScope(const ListeningScope&) = delete;
  ListeningScope& operator=(const ListeningScope&) = delete;

 private:
  InboundHandler& inbound_;
};

}  // namespace optireduce::datagram
