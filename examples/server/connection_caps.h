#pragma once
// The caps on open connections, in total and per client address. A connection holds a slot for
// its whole life; one that gets none is answered 503 and closed.

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace pagoda::server {

class ConnectionCaps;

// One admitted connection; gives its place back when destroyed. Empty when refused.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionCaps* caps, std::string address) : caps_(caps), address_(std::move(address)) {}
  ConnectionSlot(ConnectionSlot&& o) noexcept
      : caps_(std::exchange(o.caps_, nullptr)), address_(std::move(o.address_)) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ~ConnectionSlot();
  explicit operator bool() const { return caps_ != nullptr; }

 private:
  ConnectionCaps* caps_ = nullptr;
  std::string address_;
};

class ConnectionCaps {
 public:
  ConnectionCaps(size_t max_total, size_t max_per_address) : max_total_(max_total), max_per_address_(max_per_address) {}

  // A slot for a connection from `address`, or an empty one when either cap is reached.
  ConnectionSlot admit(const std::string& address);

  size_t open() const;

 private:
  friend class ConnectionSlot;
  void release(const std::string& address);

  const size_t max_total_;
  const size_t max_per_address_;
  mutable std::mutex mutex_;
  size_t total_ = 0;
  std::unordered_map<std::string, size_t> per_address_;
};

}  // namespace pagoda::server
