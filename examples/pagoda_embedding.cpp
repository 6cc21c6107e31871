// pagoda-embedding: the embeddings of prompts, or a reranker's scores of query/document pairs,
// printed as llama.cpp's llama-embedding prints them (the same flags and output formats), so
// scripts written for it run on pagoda.
//   pagoda-embedding -m model.gguf -p "first text" -p "..."
//   pagoda-embedding -m model.gguf -f texts.txt --embd-output-format json
//   pagoda-embedding -m bge-reranker.gguf -p $'what is a panda?\tThe giant panda is a bear.'
//
// Every prompt is one embedding request on the engine, batched together (Engine::embed); a
// reranker's pairs are laid out as Engine::rerank_tokens lays them out.

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "examples/common/args.h"
#include "examples/common/resource_usage.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"

namespace {

using pagoda::Error;

constexpr const char* kUsage = R"(usage: pagoda-embedding -m MODEL (-p PROMPT | -f FILE) [options]

Prints the embedding of every prompt (of every token, with pooling none), or with a reranker
(pooling rank) the relevance score of every QUERY<TAB>DOCUMENT prompt, as llama.cpp's
llama-embedding does.

  -m, --model PATH            GGUF file
  -p, --prompt TEXT           the prompts, split at --embd-separator (given more than once,
                              the texts are joined by the separator)
  -f, --file PATH             the prompts from a file (one trailing newline dropped), split likewise
  --embd-separator S          what separates prompts (default: a newline)
  --cls-separator S           what separates a reranker's query from its document within a
                              prompt (default: a tab)
  --pooling P                 none, mean, cls, last or rank (default: the model's); none
                              gives one vector per token, of every prompt in turn
  --embd-normalize N          -1 none, 0 max-absolute to the int16 range, 1 taxicab,
                              2 euclidean (default), N > 2 the p-norm; a reranker's scores are
                              printed raw whatever N is
  --embd-output-format F      '' (default) readable text: the vectors (16 values each when
                              there are several) and their cosine similarity matrix, or
                              "rerank score N: X" lines; array: [[...],...]; json: OpenAI's
                              {"object": "list", "data": [...]}; json+: json with
                              "cosineSimilarity"; raw: one vector per line
  -t, --threads N             compute threads (default: all cores)
  --no-mmap                   read the model into memory instead of mapping it
  -h, --help                  this text
)";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp reads -f
  return text;
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t hit; (hit = text.find(separator, from)) != std::string::npos; from = hit + separator.size()) {
    parts.push_back(text.substr(from, hit - from));
  }
  parts.push_back(text.substr(from));
  return parts;
}

// --pooling as the engine's (Pooling::Model when not given).
pagoda::Pooling pooling_flag(const pagoda::cli::Args& args) {
  const auto name = args.get("--pooling");
  if (!name) return pagoda::Pooling::Model;
  for (pagoda::Pooling p : {pagoda::Pooling::None, pagoda::Pooling::Mean, pagoda::Pooling::Cls, pagoda::Pooling::Last,
                            pagoda::Pooling::Rank}) {
    if (*name == pagoda::pooling_name(p)) return p;
  }
  throw Error("--pooling must be none, mean, cls, last or rank, got '" + *name + "'");
}

// Whether the model's own pooling is rank, as Engine::rerank requires (false for a pooling pagoda
// cannot give, which embed() then names).
bool is_reranker(const pagoda::Engine& engine) {
  try {
    return engine.model_pooling() == pagoda::Pooling::Rank;
  } catch (const Error&) {
    return false;
  }
}

// llama.cpp's common_embd_normalize: the sum in double, each value scaled by its inverse.
std::vector<float> normalized(const std::vector<float>& v, int norm) {
  double sum = 0.0;
  if (norm == -1) {
    sum = 1.0;
  } else if (norm == 0) {
    for (float x : v) sum = std::max(sum, double(std::abs(x)));
    sum /= 32760.0;  // the int16 range
  } else if (norm == 2) {
    for (float x : v) sum += double(x) * double(x);
    sum = std::sqrt(sum);
  } else {
    for (float x : v) sum += std::pow(std::abs(double(x)), norm);
    sum = std::pow(sum, 1.0 / norm);
  }
  const float scale = sum > 0.0 ? float(1.0 / sum) : 0.0f;
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] * scale;
  return out;
}

// llama.cpp's common_embd_similarity_cos, in double.
float cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  if (aa == 0.0 || bb == 0.0) return aa == 0.0 && bb == 0.0 ? 1.0f : 0.0f;
  return float(ab / (std::sqrt(aa) * std::sqrt(bb)));
}

struct Output {
  std::vector<std::vector<float>> rows;  // one per prompt: a vector, or a reranker's [score]; per token with none
  std::vector<std::string> prompts;
  bool rank = false;
  bool per_token = false;  // pooling none
  bool integers = false;   // --embd-normalize 0: whole numbers, printed without decimals
};

void print_text(const Output& o) {
  const size_t n = o.rows.size();
  if (o.rank) {
    for (size_t j = 0; j < n; ++j) std::printf("rerank score %zu: %8.3f\n", j, double(o.rows[j][0]));
    return;
  }
  const char* value = o.integers ? "%6.0f " : "%9.6f ";
  if (o.per_token) {  // each token's first and last three values
    for (size_t j = 0; j < n; ++j) {
      const std::vector<float>& row = o.rows[j];
      std::printf("embedding %zu: ", j);
      for (size_t i = 0; i < std::min<size_t>(3, row.size()); ++i) std::printf(value, double(row[i]));
      std::printf(" ... ");
      for (size_t i = row.size() - std::min<size_t>(3, row.size()); i < row.size(); ++i)
        std::printf(value, double(row[i]));
      std::printf("\n");
    }
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    std::printf("embedding %zu: ", j);
    const size_t shown = n > 1 ? std::min<size_t>(16, o.rows[j].size()) : o.rows[j].size();
    for (size_t i = 0; i < shown; ++i) std::printf(value, double(o.rows[j][i]));
    std::printf("\n");
  }
  if (n < 2) return;
  std::printf("\ncosine similarity matrix:\n\n");
  for (const std::string& p : o.prompts) std::printf("%6.6s ", p.c_str());
  std::printf("\n");
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) std::printf("%6.2f ", double(cosine(o.rows[i], o.rows[j])));
    std::printf("%1.10s\n", o.prompts[i].c_str());
  }
}

void print_values(const Output& o, const std::vector<float>& row, const char* between) {
  for (size_t i = 0; i < row.size(); ++i) {
    std::printf(o.integers ? "%1.0f" : "%1.7f", double(row[i]));
    if (i + 1 < row.size()) std::printf("%s", between);
  }
}

// llama-embedding's array, json and json+ layouts, byte for byte.
void print_json(const Output& o, const std::string& format) {
  const bool array = format == "array";
  const size_t n = o.rows.size();
  std::printf(array ? "[" : "{\n  \"object\": \"list\",\n  \"data\": [\n");
  for (size_t j = 0; j < n; ++j) {
    if (!array) std::printf("    {\n      \"object\": \"embedding\",\n      \"index\": %zu,\n      \"embedding\": ", j);
    std::printf("[");
    print_values(o, o.rows[j], ",");
    std::printf(array ? "]" : "]\n    }");
    if (j + 1 < n) std::printf(array ? "," : ",\n");
  }
  std::printf(array ? "]\n" : "\n  ]");
  if (format == "json+" && o.prompts.size() > 1) {  // over every row, as llama-embedding's
    std::printf(",\n  \"cosineSimilarity\": [\n");
    for (size_t i = 0; i < n; ++i) {
      std::printf("    [");
      for (size_t j = 0; j < n; ++j) std::printf(j + 1 < n ? "%6.2f, " : "%6.2f", double(cosine(o.rows[i], o.rows[j])));
      std::printf(i + 1 < n ? " ],\n" : " ]");
    }
    std::printf("\n  ]");
  }
  if (!array) std::printf("\n}\n");
}

void print_raw(const Output& o) {
  for (const std::vector<float>& row : o.rows) {
    print_values(o, row, " ");
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setlocale(LC_NUMERIC, "C");  // a decimal point, whatever the user's locale
  try {
    pagoda::cli::Args args(argc, argv,
                           {"--model", "--prompt", "--file", "--embd-separator", "--cls-separator", "--pooling",
                            "--embd-normalize", "--embd-output-format", "--threads"},
                           {"--help", "--no-mmap"}, {{"-p", "--prompt"}, {"-f", "--file"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    const auto model_path = args.get("--model");
    if (!model_path) throw Error("-m MODEL is required (see --help)");
    if (args.has("--prompt") == args.has("--file"))
      throw Error("give the prompts with -p TEXT or -f FILE (see --help)");
    const std::string separator = args.get("--embd-separator", "\n");
    const std::string cls_separator = args.get("--cls-separator", "\t");
    if (separator.empty() || cls_separator.empty())
      throw Error("--embd-separator and --cls-separator must not be empty");
    const std::string format = args.get("--embd-output-format", "");
    if (format != "" && format != "array" && format != "json" && format != "json+" && format != "raw") {
      throw Error("--embd-output-format must be '', array, json, json+ or raw, got '" + format + "'");
    }
    const int norm = args.number("--embd-normalize", 2);
    if (norm < -1)
      throw Error("--embd-normalize must be -1 (none), 0, 1, 2 or a larger p, got " + std::to_string(norm));
    const pagoda::Pooling pooling = pooling_flag(args);

    std::string text;
    if (args.has("--file")) {
      text = read_file(*args.get("--file"));
    } else {
      const std::vector<std::string> given = args.all("--prompt");
      for (size_t i = 0; i < given.size(); ++i) text += (i ? separator : "") + given[i];
    }
    Output out;
    out.prompts = split(text, separator);
    out.integers = norm == 0;

    const pagoda::cli::LoadTimer load_timer;
    pagoda::Engine engine(
        {.model_path = *model_path, .use_mmap = !args.has("--no-mmap"), .threads = args.number("--threads", 0)});
    load_timer.report(stderr, "pagoda-embedding: ", "loaded the model");
    if (pooling == pagoda::Pooling::Rank && !is_reranker(engine)) {
      throw Error("--pooling rank needs a reranker (GGUF pooling_type rank, with a rank head); this model is not one");
    }
    out.rank = pooling == pagoda::Pooling::Rank || (pooling == pagoda::Pooling::Model && is_reranker(engine));

    std::vector<pagoda::EmbeddingInput> inputs;
    for (size_t i = 0; i < out.prompts.size(); ++i) {
      const std::string& p = out.prompts[i];
      if (!out.rank) {
        inputs.emplace_back(p);
        continue;
      }
      // A reranker scores a pair: the query before the first separator, the document after it.
      const size_t cut = p.find(cls_separator);
      if (cut == std::string::npos) {
        throw Error("prompt " + std::to_string(i) + " has no --cls-separator: a reranker scores QUERY" +
                    (cls_separator == "\t" ? std::string("<TAB>") : cls_separator) + "DOCUMENT pairs");
      }
      inputs.emplace_back(engine.rerank_tokens(p.substr(0, cut), p.substr(cut + cls_separator.size())));
    }
    const pagoda::EmbeddingParams params{out.rank ? pagoda::Pooling::Rank : pooling, false};
    out.per_token =
        !out.rank && (pooling == pagoda::Pooling::None ||
                      (pooling == pagoda::Pooling::Model && engine.model_pooling() == pagoda::Pooling::None));
    const auto dim = size_t(engine.embedding_size());
    for (std::vector<float>& v : engine.embed(inputs, params)) {
      if (out.rank) {
        out.rows.push_back({v.at(0)});  // scores are never normalized
      } else if (out.per_token) {
        for (size_t r = 0; r < v.size(); r += dim)
          out.rows.push_back(normalized({v.begin() + ptrdiff_t(r), v.begin() + ptrdiff_t(r + dim)}, norm));
      } else {
        out.rows.push_back(normalized(v, norm));
      }
    }
    out.integers = out.integers && !out.rank;

    if (format.empty()) print_text(out);
    else if (format == "raw") print_raw(out);
    else print_json(out, format);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-embedding: %s\n", e.what());
    return 1;
  }
}
