#pragma once
// A small command-line reader shared by the example programs: `--flag value` and `-f value`,
// repeated flags, and one-line errors ("pagoda-generate: --temp needs a number").

#include <charconv>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "pagoda/error.h"

namespace pagoda::cli {

// A table of flag names; a program's flags are its own table and the shared ones it reads
// (kSamplingFlags, kSpeculativeFlags, kGrammarFlags).
using FlagNames = std::span<const char* const>;

inline std::set<std::string> flag_set(std::initializer_list<FlagNames> tables) {
  std::set<std::string> flags;
  for (FlagNames table : tables) flags.insert(table.begin(), table.end());
  return flags;
}

// Short spellings every llama.cpp program shares.
inline const std::map<std::string, std::string> kConventionalAliases = {
    {"-m", "--model"},        {"-t", "--threads"},          {"-h", "--help"},       {"-c", "--ctx-size"},
    {"-md", "--model-draft"}, {"--lookup", "--spec-ngram"}, {"-j", "--json-schema"}};

class Args {
 public:
  // `with_value` names the flags that take a value, `switches` those that do not; aliases map
  // a short spelling to its long one ("-n" → "--n-predict"). llama.cpp's usual short spellings
  // (kConventionalAliases) hold too wherever the program has their long flag, unless `aliases`
  // spells them otherwise.
  Args(int argc, char** argv, std::set<std::string> with_value, std::set<std::string> switches,
       std::map<std::string, std::string> aliases = {}) {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (auto a = aliases.find(flag); a != aliases.end()) {
        flag = a->second;
      } else if (auto c = kConventionalAliases.find(flag); c != kConventionalAliases.end()) {
        if (with_value.count(c->second) || switches.count(c->second)) flag = c->second;
      }
      if (switches.count(flag)) {
        values_[flag].push_back("");
      } else if (with_value.count(flag)) {
        if (i + 1 >= argc) throw Error(flag + " needs a value");
        values_[flag].push_back(argv[++i]);
      } else {
        throw Error("unknown argument '" + flag + "' (see --help)");
      }
    }
  }

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }

  std::optional<std::string> get(const std::string& flag) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return std::nullopt;
    return it->second.back();
  }
  std::string get(const std::string& flag, const std::string& fallback) const { return get(flag).value_or(fallback); }
  std::vector<std::string> all(const std::string& flag) const {
    auto it = values_.find(flag);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }

  template <typename Number>
  Number number(const std::string& flag, Number fallback) const {
    auto text = get(flag);
    return text ? parse<Number>(flag, *text) : fallback;
  }

  // A flag and the field it overrides when given: a number, parsed as number() parses it, or
  // text. For reading a table of flags at once with set_fields.
  class Field {
   public:
    template <typename T>
    Field(const char* flag, T& field)
        : flag_(flag), set_([&field](const Args& args, const std::string& flag) {
            if constexpr (std::is_same_v<T, std::string>) {
              field = args.get(flag, field);
            } else {
              field = args.number(flag, field);
            }
          }) {}
    void set_from(const Args& args) const { set_(args, flag_); }

   private:
    std::string flag_;
    std::function<void(const Args&, const std::string&)> set_;
  };

  // Overrides each field whose flag was given, in order.
  void set_fields(std::initializer_list<Field> fields) const {
    for (const Field& field : fields) field.set_from(*this);
  }

  template <typename Number>
  static Number parse(const std::string& flag, const std::string& text) {
    Number value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw Error(flag + " needs a number, got '" + text + "'");
    }
    return value;
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace pagoda::cli
