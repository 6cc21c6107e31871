// JSON from a user is built by our own SAX handler rather than nlohmann's DOM parser, for two
// bounds nlohmann's parser does not keep:
// - depth: a container opening past the limit throws before anything deeper is built;
// - time: nlohmann's ordered_map finds a key by scanning the object, so its parser spends
//   O(keys²) on one wide object (a 1 MiB body of short keys took seconds). Objects here keep a
//   hash index of their keys once they grow past a few, so parsing stays linear in the text.
// Duplicate keys behave as in nlohmann's parser: the last value wins, at the first key's place.

#include "engine/util/json_depth.h"

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pagoda/error.h"

namespace pagoda {
namespace {

// nlohmann::ordered_map is a std::vector of pairs underneath; std::map is not.
template <class Object>
concept VectorBackedObject = requires {
  typename Object::Container;
};

template <class Json>
class BoundedBuilder {
  using Object = typename Json::object_t;
  using String = typename Json::string_t;

 public:
  BoundedBuilder(std::string_view what, bool allow_exceptions, size_t max_depth)
      : what_(what), allow_exceptions_(allow_exceptions), max_depth_(max_depth) {}

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool value) { return put(Json(value)); }
  bool number_integer(typename Json::number_integer_t value) { return put(Json(value)); }
  bool number_unsigned(typename Json::number_unsigned_t value) { return put(Json(value)); }
  bool number_float(typename Json::number_float_t value, const String&) { return put(Json(value)); }
  bool string(String& value) { return put(Json(std::move(value))); }
  bool binary(typename Json::binary_t& value) { return put(Json::binary(std::move(value))); }
  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(String& name) {
    Open& top = open_.back();
    Object& object = top.value->template get_ref<Object&>();
    if constexpr (VectorBackedObject<Object>) {
      auto& entries = static_cast<typename Object::Container&>(object);
      if (const size_t at = top.find(entries, name); at != kNone) {
        slot_ = &entries[at].second;
        return true;
      }
      entries.emplace_back(std::move(name), Json());
      top.add(entries, entries.size() - 1);
      slot_ = &entries.back().second;
    } else {
      slot_ = &object[std::move(name)];
    }
    return true;
  }

  // Rethrows with the parser's own exception type (parse_error, out_of_range), as nlohmann's
  // parse does.
  template <class Exception>
  bool parse_error(size_t, const std::string&, const Exception& error) {
    errored_ = true;
    if (allow_exceptions_) throw error;
    return false;
  }

  Json result() && { return errored_ ? Json(Json::value_t::discarded) : std::move(root_); }

 private:
  static constexpr size_t kNone = size_t(-1);
  // Objects up to this many keys are scanned; past it they index their keys by hash.
  static constexpr size_t kScanLimit = 16;

  struct Open {
    Json* value;
    std::unordered_multimap<size_t, size_t> index;  // key hash -> entry position

    template <class Entries>
    size_t find(const Entries& entries, const String& name) const {
      if (entries.size() <= kScanLimit) {
        for (size_t i = 0; i < entries.size(); ++i)
          if (entries[i].first == name) return i;
        return kNone;
      }
      const auto [first, last] = index.equal_range(std::hash<String>{}(name));
      for (auto it = first; it != last; ++it)
        if (entries[it->second].first == name) return it->second;
      return kNone;
    }

    template <class Entries>
    void add(const Entries& entries, size_t at) {
      if (entries.size() <= kScanLimit) return;
      if (index.empty())  // crossing the limit: index every key so far
        for (size_t i = 0; i < entries.size(); ++i) index.emplace(std::hash<String>{}(entries[i].first), i);
      else index.emplace(std::hash<String>{}(entries[at].first), at);
    }
  };

  // The place the next value goes: the root, the end of the open array, or the slot of the
  // open object's last key.
  Json* place(Json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& top = *open_.back().value;
    if (top.is_array()) {
      auto& items = top.template get_ref<typename Json::array_t&>();
      items.push_back(std::move(value));
      return &items.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }

  bool put(Json&& value) {
    place(std::move(value));
    return true;
  }

  bool open(Json&& container) {
    if (open_.size() >= max_depth_) throw Error(json_depth_error(what_, max_depth_));
    // The parent is not touched again until this container closes, so the pointer stays valid.
    open_.push_back({place(std::move(container)), {}});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  std::string_view what_;
  bool allow_exceptions_;
  size_t max_depth_;
  Json root_;
  Json* slot_ = nullptr;
  std::vector<Open> open_;
  bool errored_ = false;
};

template <class Json>
Json parse_bounded(std::string_view text, std::string_view what, bool allow_exceptions, size_t max_depth) {
  BoundedBuilder<Json> builder(what, allow_exceptions, max_depth);
  Json::sax_parse(text.begin(), text.end(), &builder);
  return std::move(builder).result();
}

template <class Json>
void check_bounded(const Json& value, std::string_view what, size_t max_depth) {
  std::vector<std::pair<const Json*, size_t>> pending{{&value, 0}};  // a value, the containers around it
  while (!pending.empty()) {
    const auto [v, around] = pending.back();
    pending.pop_back();
    if (!v->is_structured()) continue;
    if (around >= max_depth) throw Error(json_depth_error(what, max_depth));
    for (const Json& child : *v) pending.emplace_back(&child, around + 1);
  }
}

}  // namespace

std::string json_depth_error(std::string_view what, size_t max_depth) {
  return std::string(what) + ": JSON nested deeper than " + std::to_string(max_depth) + " levels";
}

nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, bool allow_exceptions,
                                  size_t max_depth) {
  return parse_bounded<nlohmann::json>(text, what, allow_exceptions, max_depth);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what, bool allow_exceptions,
                                                  size_t max_depth) {
  return parse_bounded<nlohmann::ordered_json>(text, what, allow_exceptions, max_depth);
}

void check_json_depth(const nlohmann::json& value, std::string_view what, size_t max_depth) {
  check_bounded(value, what, max_depth);
}

void check_json_depth(const nlohmann::ordered_json& value, std::string_view what, size_t max_depth) {
  check_bounded(value, what, max_depth);
}

}  // namespace pagoda
