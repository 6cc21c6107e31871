#include "bench/pagoda_bench/options.h"

#include <tbb/info.h>

#include "examples/common/args.h"
#include "pagoda/error.h"

namespace pagoda::benchtool {

const char* const kUsage = R"(usage: pagoda-bench -m MODEL [options]
llama.cpp's llama-bench for pagoda: every test parameter takes a comma list (or the flag
repeated), and each combination is one test, run once to warm up and then -r times.

  -m, --model PATH         GGUF model (comma list or repeated)
  -p, --n-prompt N         ppN: prefill N random prompt tokens (default 512; 0: none)
  -n, --n-gen N            tgN: generate N tokens after a one-token prompt (default 128; 0: none)
  -d, --n-depth D          run each test after D tokens of context ("tg128 @ d4096"); pp
                           takes the D tokens from the prefix cache (default 0)
  -B, --n-seqs B           pagoda's concurrent sequences, as llama-batched-bench: B requests of
                           N prompt tokens each generating -n tokens at once ("pp512+tg128 x8");
                           t/s is B*(N+n) over the whole job, with S_PP and S_TG beside it
  -t, --threads N          compute threads (default: all cores)
  -b, --batch-size N       tokens in one forward step (default 2048)
  -ub, --ubatch-size N     prefill tokens of one sequence in one step (default 512)
  -ctk, --cache-type-k T   KV cache type: f32, f16 (default), bf16 or q8_0; pagoda keeps K and V
  -ctv, --cache-type-v T   in one type, so -ctv must equal -ctk (--cache-type sets both)
  -mmp, --mmap 0|1         map the model file (default 1); --no-mmap is -mmp 0
  -r, --repetitions N      timed runs of each test (default 5)
  -o, --output FORMAT      md (default), json, jsonl or csv, as llama-bench writes them
  --progress               say on stderr which test and run is going
  -h, --help

Rooflines come from the same run: the fp32 FMA peak is measured at start, the streaming read
bandwidth at start and again before each test's first timed run and after each (the best of
a test's samples is its bandwidth_gbs: these machines' bandwidth drifts within minutes). tg
rows get roofline_ts (bandwidth / bytes read per token: weights and the KV cache at that
depth) and the fraction of it reached; pp rows the GFLOP/s reached and the
fraction of the fp32 FMA peak of their threads; -B rows both, for S_TG and S_PP. A model that
stays in the CPU's caches can pass the memory roofline, and quantized weights, multiplied in
int8, the fp32 peak.
)";

namespace {

cli::Args parse_args(int argc, char** argv) {
  return cli::Args(argc, argv,
                   {"--model", "--n-prompt", "--n-gen", "--n-depth", "--n-seqs", "--threads", "--batch-size",
                    "--ubatch-size", "--cache-type-k", "--cache-type-v", "--mmap", "--repetitions", "--output"},
                   {"--no-mmap", "--progress", "--help"},
                   {{"-p", "--n-prompt"},
                    {"-n", "--n-gen"},
                    {"-d", "--n-depth"},
                    {"-B", "--n-seqs"},
                    {"-b", "--batch-size"},
                    {"-ub", "--ubatch-size"},
                    {"-ctk", "--cache-type-k"},
                    {"-ctv", "--cache-type-v"},
                    {"--cache-type", "--cache-type-k"},
                    {"-mmp", "--mmap"},
                    {"-r", "--repetitions"},
                    {"-o", "--output"}});
}

// Every value of `flag`, each occurrence split at commas.
std::vector<std::string> list(const cli::Args& args, const std::string& flag) {
  std::vector<std::string> out;
  for (const std::string& value : args.all(flag)) {
    size_t start = 0;
    for (size_t comma; (comma = value.find(',', start)) != std::string::npos; start = comma + 1) {
      out.push_back(value.substr(start, comma - start));
    }
    out.push_back(value.substr(start));
  }
  return out;
}

// The flag's numbers, each at least `min`, or `fallback` when the flag is absent.
std::vector<int> numbers(const cli::Args& args, const std::string& flag, int min, std::vector<int> fallback) {
  const std::vector<std::string> texts = list(args, flag);
  if (texts.empty()) return fallback;
  std::vector<int> out;
  for (const std::string& text : texts) {
    const int n = cli::Args::parse<int>(flag, text);
    if (n < min) throw Error(flag + " must be at least " + std::to_string(min) + ", got " + text);
    out.push_back(n);
  }
  return out;
}

std::vector<KvCacheType> cache_types(const cli::Args& args) {
  const std::vector<std::string> k = list(args, "--cache-type-k"), v = list(args, "--cache-type-v");
  if (args.has("--cache-type-v") && v != k) {
    throw Error("pagoda keeps K and V in one type: -ctv must equal -ctk (or give --cache-type)");
  }
  if (k.empty()) return default_options().cache_types;
  std::vector<KvCacheType> out;
  for (const std::string& name : k) {
    const auto type = parse_kv_cache_type(name);
    if (!type) throw Error("-ctk must be f32, f16, bf16 or q8_0, got '" + name + "'");
    out.push_back(*type);
  }
  return out;
}

std::vector<bool> use_mmap(const cli::Args& args) {
  if (args.has("--no-mmap") && args.has("--mmap")) throw Error("give --no-mmap or -mmp, not both");
  if (args.has("--no-mmap")) return {false};
  std::vector<bool> out;
  for (int n : numbers(args, "--mmap", 0, {1})) {
    if (n > 1) throw Error("-mmp must be 0 or 1, got " + std::to_string(n));
    out.push_back(n == 1);
  }
  return out;
}

OutputFormat output_format(const cli::Args& args) {
  const std::string name = args.get("--output", "md");
  if (name == "md") return OutputFormat::Markdown;
  if (name == "json") return OutputFormat::Json;
  if (name == "jsonl") return OutputFormat::Jsonl;
  if (name == "csv") return OutputFormat::Csv;
  throw Error("-o must be md, json, jsonl or csv, got '" + name + "'");
}

}  // namespace

const Options& default_options() {
  static const Options defaults = [] {
    Options o;
    o.threads = {tbb::info::default_concurrency()};  // what the engine takes for "all cores"
    return o;
  }();
  return defaults;
}

Options parse_options(int argc, char** argv) {
  const cli::Args args = parse_args(argc, argv);
  const Options& d = default_options();
  Options o;
  o.help = args.has("--help");
  if (o.help) return o;
  o.models = list(args, "--model");
  if (o.models.empty()) throw Error("-m MODEL is required (see --help)");
  o.n_prompt = numbers(args, "--n-prompt", 0, d.n_prompt);
  o.n_gen = numbers(args, "--n-gen", 0, d.n_gen);
  o.n_depth = numbers(args, "--n-depth", 0, d.n_depth);
  o.n_seqs = numbers(args, "--n-seqs", 1, {});
  o.threads = numbers(args, "--threads", 1, d.threads);
  o.n_batch = numbers(args, "--batch-size", 1, d.n_batch);
  o.n_ubatch = numbers(args, "--ubatch-size", 1, d.n_ubatch);
  o.cache_types = cache_types(args);
  o.use_mmap = use_mmap(args);
  o.reps = args.number("--repetitions", d.reps);
  if (o.reps < 1) throw Error("-r must be at least 1, got " + std::to_string(o.reps));
  o.output = output_format(args);
  o.progress = args.has("--progress");
  return o;
}

}  // namespace pagoda::benchtool
