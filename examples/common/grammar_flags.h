#pragma once
// The output-constraint flags the example programs share, spelled as llama.cpp spells them:
// --grammar GBNF, --grammar-file FILE, --json-schema JSON, --json-schema-file FILE (at most one).

#include <fstream>
#include <sstream>
#include <string>

#include "examples/common/args.h"
#include "pagoda/request.h"

namespace pagoda::cli {

inline constexpr const char* kGrammarFlags[] = {"--grammar", "--grammar-file", "--json-schema", "--json-schema-file"};

inline constexpr const char* kGrammarUsage =
    "  --grammar GBNF          constrain the output to a grammar (llama.cpp's GBNF, rule `root`)\n"
    "  --grammar-file FILE     the same, read from FILE\n"
    "  -j, --json-schema JSON  constrain the output to JSON valid against a JSON Schema\n"
    "  --json-schema-file FILE the same, read from FILE\n";

inline std::string read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(flag + ": cannot read '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sets r.grammar or r.json_schema from the flags; the engine checks the text when r is submitted.
inline void constraint_from_flags(const Args& args, Request& r) {
  int given = 0;
  for (const char* flag : kGrammarFlags) given += args.has(flag) ? 1 : 0;
  if (given > 1) throw Error("give one of --grammar, --grammar-file, --json-schema and --json-schema-file");
  if (auto g = args.get("--grammar")) r.grammar = *g;
  if (auto f = args.get("--grammar-file")) r.grammar = read_text_file("--grammar-file", *f);
  if (auto s = args.get("--json-schema")) r.json_schema = *s;
  if (auto f = args.get("--json-schema-file")) r.json_schema = read_text_file("--json-schema-file", *f);
}

}  // namespace pagoda::cli
