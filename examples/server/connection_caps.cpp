#include "examples/server/connection_caps.h"

namespace pagoda::server {

ConnectionSlot::~ConnectionSlot() {
  if (caps_) caps_->release(address_);
}

ConnectionSlot ConnectionCaps::admit(const std::string& address) {
  std::lock_guard lock(mutex_);
  size_t& mine = per_address_[address];
  if (total_ >= max_total_ || mine >= max_per_address_) {
    if (mine == 0) per_address_.erase(address);
    return {};
  }
  ++total_;
  ++mine;
  return ConnectionSlot(this, address);
}

void ConnectionCaps::release(const std::string& address) {
  std::lock_guard lock(mutex_);
  --total_;
  // Erased at zero, so the map holds only addresses with open connections.
  if (auto it = per_address_.find(address); it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

size_t ConnectionCaps::open() const {
  std::lock_guard lock(mutex_);
  return total_;
}

}  // namespace pagoda::server
