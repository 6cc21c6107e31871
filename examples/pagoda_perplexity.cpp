// pagoda-perplexity: a model's perplexity on a text, as llama.cpp's llama-perplexity measures
// it (chunks of -c tokens, BOS first, the second half of each chunk scored), or on given token
// sequences; with --json, the argmax and the negative log-likelihood at every scored position,
// which is how two quantizations of a model are compared position by position.
//   pagoda-perplexity -m model.gguf -f wiki.test.raw -c 512
//   pagoda-perplexity -m model.gguf --ids ids.json --json out.json
//
// Every step of the batched forward pass holds several whole chunks (up to -b tokens), and
// logits come for every position of each.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampler.h"
#include "examples/common/args.h"
#include "examples/common/cache_type_flag.h"

namespace {

using pagoda::Error;

constexpr const char* kUsage = R"(usage: pagoda-perplexity -m MODEL (-f TEXT | --ids FILE.json) [options]
  -m, --model PATH        GGUF file, or llama2.c checkpoint (.bin)
  --tokenizer PATH        llama2.c tokenizer.bin (default: tokenizer.bin beside the checkpoint)
  -f, --file PATH         text to score, as llama-perplexity: tokenized whole (BOS first when
                          the model adds one), cut into chunks of -c tokens, each chunk's first
                          token replaced by BOS, the second half of every chunk scored
  --ids FILE.json         instead of a text: a JSON array of token-id arrays, each fed as given
                          and scored at every position
  -c, --ctx-size N        chunk length for -f (default 512)
  --chunks N              score at most N chunks (default: all)
  -b, --batch-size N      tokens per forward step; whole chunks share a step (default 2048)
  -t, --threads N         compute threads (default: all cores)
  --cache-type T          KV cache type: f32, f16 (default, as llama-perplexity), bf16 or q8_0
  --no-mmap               read the model into memory instead of mapping it (llama.cpp's
                          flag): costs its size in RSS, and the file may then change freely
  --json OUT              write {"ppl", "ppl_error", "sequences": [{"first_scored", "argmax",
                          "nll"}]}: argmax[i] is the argmax of the logits at position i (the
                          prediction of token i + 1), for every position; nll[j] is the
                          negative log-likelihood of token first_scored + j + 1
)";

struct Sequence {
  std::vector<int32_t> tokens;
  int32_t first_scored = 0;  // logits at positions first_scored .. size - 2 are scored
};

struct Scores {
  std::vector<int32_t> argmax;
  std::vector<double> nll;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Sequence> chunks_of_text(const pagoda::Model& model, const std::string& path, int32_t ctx,
                                     int64_t max_chunks) {
  const pagoda::Tokenizer& tok = model.tokenizer;
  const std::vector<int32_t> ids = tok.encode(read_text(path), tok.add_bos());
  if (int64_t(ids.size()) < 2 * int64_t(ctx)) {
    throw Error(path + ": " + std::to_string(ids.size()) + " tokens; at least " + std::to_string(2 * ctx) +
                " (2 x -c) are needed to score chunks of " + std::to_string(ctx));
  }
  const int64_t n_chunks = std::min<int64_t>(int64_t(ids.size()) / ctx, max_chunks);
  std::vector<Sequence> chunks;
  for (int64_t i = 0; i < n_chunks; ++i) {
    Sequence s{{ids.begin() + i * ctx, ids.begin() + (i + 1) * ctx}, ctx / 2};
    if (tok.add_bos()) s.tokens[0] = tok.bos_id();
    chunks.push_back(std::move(s));
  }
  return chunks;
}

std::vector<Sequence> sequences_of_ids(const std::string& path, int32_t vocab) {
  const nlohmann::json j = nlohmann::json::parse(read_text(path), nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.empty()) throw Error(path + ": not a non-empty JSON array of id arrays");
  std::vector<Sequence> seqs;
  for (size_t s = 0; s < j.size(); ++s) {
    const std::string where = path + ": sequence " + std::to_string(s);
    if (!j[s].is_array() || j[s].empty()) throw Error(where + " is not a non-empty array of token ids");
    Sequence seq;
    for (const auto& id : j[s]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
        throw Error(where + ": " + id.dump() + " is not a token id below the vocabulary size " + std::to_string(vocab));
      }
      seq.tokens.push_back(id.get<int32_t>());
    }
    seqs.push_back(std::move(seq));
  }
  return seqs;
}

// −log softmax(logits)[token], with the sum of exponentials kept in double as llama.cpp does.
double negative_log_likelihood(std::span<const float> logits, int32_t token) {
  return pagoda::log_sum_exp(logits) - double(logits[token]);
}

// Consecutive runs of sequences whose tokens together stay within `budget` (a longer sequence
// runs alone): each run is one forward step.
std::vector<std::pair<size_t, size_t>> plan_steps(const std::vector<Sequence>& seqs, int64_t budget) {
  std::vector<std::pair<size_t, size_t>> steps;
  size_t begin = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto n = int64_t(seqs[i].tokens.size());
    if (i > begin && tokens + n > budget) {
      steps.emplace_back(begin, i);
      begin = i;
      tokens = 0;
    }
    tokens += n;
  }
  steps.emplace_back(begin, seqs.size());
  return steps;
}

struct Estimate {
  double sum = 0.0, sum_sq = 0.0;
  int64_t count = 0;
  void add(double nll) {
    sum += nll;
    sum_sq += nll * nll;
    ++count;
  }
  double ppl() const { return std::exp(sum / double(count)); }
  // llama-perplexity's error: the standard error of the mean NLL, times the perplexity.
  double error() const {
    const double mean = sum / double(count), var = sum_sq / double(count) - mean * mean;
    return count > 1 && var > 0 ? std::sqrt(var / double(count - 1)) * ppl() : 0.0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    pagoda::cli::Args args(argc, argv,
                           {"--model", "--tokenizer", "--file", "--ids", "--ctx-size", "--chunks", "--batch-size",
                            "--threads", "--cache-type", "--json"},
                           {"--help", "--no-mmap"}, {{"-f", "--file"}, {"-b", "--batch-size"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    const auto model_path = args.get("--model");
    if (!model_path) throw Error("-m MODEL is required (see --help)");
    if (args.has("--file") == args.has("--ids")) throw Error("give one of -f TEXT or --ids FILE.json (see --help)");
    const auto ctx = args.number<int32_t>("--ctx-size", 512);
    const auto batch = args.number<int64_t>("--batch-size", 2048);
    const auto max_chunks = args.number<int64_t>("--chunks", INT64_MAX);
    if (ctx < 2) throw Error("-c must be at least 2");
    if (batch < 1) throw Error("-b must be at least 1");
    const pagoda::KvCacheType cache_type = pagoda::cli::cache_type_flag(args);

    const auto t0 = std::chrono::steady_clock::now();
    const pagoda::Model model =
        pagoda::load_model(*model_path, args.get("--tokenizer", ""),
                           args.has("--no-mmap") ? pagoda::MappedFile::Load::Copy : pagoda::MappedFile::Load::Map);
    pagoda::ModelRunner runner(model, args.number("--threads", 0));
    const pagoda::ModelConfig& config = model.config;
    const std::vector<Sequence> seqs = args.has("--file") ? chunks_of_text(model, *args.get("--file"), ctx, max_chunks)
                                                          : sequences_of_ids(*args.get("--ids"), config.vocab_size);
    size_t longest = 0;
    for (const Sequence& s : seqs) longest = std::max(longest, s.tokens.size());
    if (int64_t(longest) > config.context_length) {
      throw Error("sequences of " + std::to_string(longest) + " tokens do not fit the model's context of " +
                  std::to_string(config.context_length));
    }
    const auto steps = plan_steps(seqs, batch);
    std::fprintf(stderr,
                 "pagoda-perplexity: %zu sequences (longest %zu tokens) in %zu steps, %d threads, %s KV cache\n",
                 seqs.size(), longest, steps.size(), runner.threads(), pagoda::kv_cache_type_name(cache_type));

    constexpr int32_t kTokensPerPage = 16;
    const pagoda::KvLayout layout = pagoda::KvLayout::for_model(config, kTokensPerPage, cache_type);
    // A sequence is scored in one step, so each KV group holds all of its pages.
    auto pages_for = [&](size_t tokens) {
      return int32_t((tokens + kTokensPerPage - 1) / kTokensPerPage) * layout.n_groups();
    };
    int32_t pool_pages = 0;
    for (const auto& [begin, end] : steps) {
      int32_t pages = 0;
      for (size_t i = begin; i < end; ++i) pages += pages_for(seqs[i].tokens.size());
      pool_pages = std::max(pool_pages, pages);
    }
    pagoda::PagePool pool(layout, pool_pages);

    const auto t1 = std::chrono::steady_clock::now();
    std::vector<Scores> scores(seqs.size());
    Estimate estimate;
    std::vector<float> logits;
    int64_t tokens_run = 0;
    for (const auto& [begin, end] : steps) {
      std::vector<pagoda::BlockTable> tables(end - begin, pagoda::BlockTable(pool.layout()));
      pagoda::Batch step;
      for (size_t i = begin; i < end; ++i) {
        pagoda::BlockTable& table = tables[i - begin];
        if (!table.reserve(int32_t(seqs[i].tokens.size()), pool)) throw Error("internal: the KV pool is too small");
        pagoda::BatchEntry e;
        e.tokens = seqs[i].tokens;
        e.block_table = &table;
        e.all_logits = true;
        step.entries.push_back(e);
      }
      runner.forward(step, pool.view(), logits);
      tokens_run += step.total_tokens();
      size_t row = 0;
      for (size_t i = begin; i < end; ++i) {
        const Sequence& s = seqs[i];
        for (size_t pos = 0; pos < s.tokens.size(); ++pos, ++row) {
          const std::span<const float> r(logits.data() + row * size_t(config.vocab_size), size_t(config.vocab_size));
          scores[i].argmax.push_back(pagoda::argmax(r));
          if (int32_t(pos) < s.first_scored || pos + 1 >= s.tokens.size()) continue;
          scores[i].nll.push_back(negative_log_likelihood(r, s.tokens[pos + 1]));
          estimate.add(scores[i].nll.back());
        }
        if (estimate.count > 0) std::printf("[%zu]%.4f,", i + 1, estimate.ppl());
        std::fflush(stdout);
      }
      for (pagoda::BlockTable& t : tables) t.release(pool);
    }
    std::printf("\n");
    const auto t2 = std::chrono::steady_clock::now();
    if (estimate.count == 0) throw Error("no position to score (every sequence has a single token)");
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", estimate.ppl(), estimate.error());
    const double load_s = std::chrono::duration<double>(t1 - t0).count();
    const double run_s = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr,
                 "pagoda-perplexity: %lld positions scored; load %.2f s, %lld tokens in %.2f s (%.0f tokens/s)\n",
                 static_cast<long long>(estimate.count), load_s, static_cast<long long>(tokens_run), run_s,
                 double(tokens_run) / run_s);

    if (const auto json_path = args.get("--json")) {
      nlohmann::json out;
      out["ppl"] = estimate.ppl();
      out["ppl_error"] = estimate.error();
      out["sequences"] = nlohmann::json::array();
      for (size_t i = 0; i < seqs.size(); ++i) {
        out["sequences"].push_back(
            {{"first_scored", seqs[i].first_scored}, {"argmax", scores[i].argmax}, {"nll", scores[i].nll}});
      }
      std::ofstream f(*json_path);
      f << out.dump() << "\n";
      if (!f) throw Error(*json_path + ": cannot write");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-perplexity: %s\n", e.what());
    return 1;
  }
}
