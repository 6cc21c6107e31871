#pragma once
// The names a request's `model` field may give: the base model's, and each loaded LoRA
// adapter's (vLLM's convention: naming an adapter runs the request on it).

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::server {

class ModelNames {
 public:
  explicit ModelNames(std::string base) : base_(std::move(base)) {}

  const std::string& base() const { return base_; }

  // The adapter a `model` field names: "" for the base model (or no field), the adapter's name
  // for an adapter; nullopt for a name nothing has.
  std::optional<std::string> adapter_for(const std::string& model) const {
    if (model.empty() || model == base_) return std::string();
    std::lock_guard lock(mutex_);
    if (adapters_.count(model)) return model;
    return std::nullopt;
  }

  void add_adapter(const std::string& name, const std::string& path) {
    std::lock_guard lock(mutex_);
    adapters_[name] = path;
  }
  void remove_adapter(const std::string& name) {
    std::lock_guard lock(mutex_);
    adapters_.erase(name);
  }
  bool has_adapter(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return adapters_.count(name) > 0;
  }

  struct Adapter {
    std::string name, path;
  };
  std::vector<Adapter> adapters() const {
    std::lock_guard lock(mutex_);
    std::vector<Adapter> out;
    for (const auto& [name, path] : adapters_) out.push_back({name, path});
    return out;
  }

 private:
  std::string base_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> adapters_;
};

}  // namespace pagoda::server
