// One result type for the whole project: a code and, when it is not ok, one line saying what
// went wrong. Functions that can fail return Status (or take one by reference when they also
// return a value); the macros keep the happy path short.
#pragma once

#include <string>
#include <utility>

namespace optireduce {

enum class StatusCode {
  ok = 0,
  timeout,      // a bounded wait ended before the event it waited for
  unavailable,  // a component could not start here (library missing, no device, refused)
  invalid,      // bad input: a setting, an address, a message
  io,           // a system or library call failed
  peer,         // a peer failed or disagreed
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "timeout: no answer from rank 3 within 600000 ms"
  std::string text() const { return ok() ? "ok" : std::string(to_string(code_)) + ": " + message_; }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status Timeout(std::string m) { return {StatusCode::timeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::unavailable, std::move(m)}; }
inline Status Invalid(std::string m) { return {StatusCode::invalid, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::io, std::move(m)}; }
inline Status PeerError(std::string m) { return {StatusCode::peer, std::move(m)}; }

inline const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::timeout: return "timeout";
    case StatusCode::unavailable: return "unavailable";
    case StatusCode::invalid: return "invalid";
    case StatusCode::io: return "io";
    case StatusCode::peer: return "peer";
  }
  return "?";
}

}  // namespace optireduce

// Returns the Status of `expr` from the enclosing function unless it is ok.
#define OR_RETURN_IF_ERROR(expr)                         \
  do {                                                   \
    ::optireduce::Status or_status_ = (expr);            \
    if (!or_status_.ok()) return or_status_;             \
  } while (0)

// Returns a Status of `code` with `message` (a std::string expression) unless `cond` holds.
#define OR_CHECK(cond, code, message)                                        \
  do {                                                                       \
    if (!(cond)) return ::optireduce::Status(::optireduce::StatusCode::code, (message)); \
  } while (0)
