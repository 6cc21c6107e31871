// pagoda-bench: llama.cpp's llama-bench for pagoda, through the public Engine API. Each test is
// a prompt-processing (ppN) or text-generation (tgN) run, optionally after -d tokens of context,
// or with -B a job of concurrent sequences as llama-batched-bench runs them; the results come
// in llama-bench's formats, with rooflines measured in the same run beside them.
//   pagoda-bench -m model.gguf                      # pp512, tg128, 5 runs each
//   pagoda-bench -m model.gguf -p 128,512 -n 64 -d 0,4096 -t 1,2 -o json
//   pagoda-bench -m model.gguf -p 128 -n 64 -B 1,8,32

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/pagoda_bench/engine_setup.h"
#include "bench/pagoda_bench/machine.h"
#include "bench/pagoda_bench/model_facts.h"
#include "bench/pagoda_bench/options.h"
#include "bench/pagoda_bench/printers.h"
#include "bench/pagoda_bench/roofline.h"
#include "bench/pagoda_bench/run_test.h"
#include "bench/pagoda_bench/test_spec.h"
#include "kernels/kv_rows.h"
#include "pagoda/engine.h"

namespace {

using namespace pagoda::benchtool;
using pagoda::KvCacheType;

// What one position of context costs in each KV cache type that fits the model, as
// "f32 65536, f16 32768, bf16 32768, q8_0 17408 bytes".
std::string kv_costs(const ModelFacts& m) {
  std::string out;
  for (KvCacheType t : {KvCacheType::F32, KvCacheType::F16, KvCacheType::BF16, KvCacheType::Q8_0}) {
    if (!pagoda::kernels::kv_row_fits(t, m.head_dim)) continue;
    out += (out.empty() ? "" : ", ") + std::string(kv_cache_type_name(t)) + " " +
           std::to_string(uint64_t(m.kv_bytes_per_position(t)));
  }
  return out + " bytes";
}

// Every model is read before anything runs, so a missing file or a test beyond a model's
// context fails at once rather than after minutes of other tests.
std::map<std::string, ModelFacts> read_models(const Options& options, const std::vector<TestSpec>& tests) {
  std::map<std::string, ModelFacts> models;
  for (const std::string& path : options.models) {
    const ModelFacts& m = models.emplace(path, read_model_facts(path)).first->second;
    check_model(m, options, tests);
    std::fprintf(stderr, "pagoda-bench: %s: KV cache per token of context: %s\n", path.c_str(), kv_costs(m).c_str());
  }
  return models;
}

Machine measure_and_report_machine(pagoda::bench::ReadBandwidthProbe& probe) {
  std::fprintf(stderr, "pagoda-bench: load average at start: %s\n", load_average().c_str());
  const Machine m = measure_machine(probe);
  std::fprintf(stderr, "pagoda-bench: %s: read bandwidth %.1f GB/s, fp32 FMA peak %.1f GFLOP/s (%d threads)\n",
               m.cpu_info.c_str(), m.read_bytes_per_s * 1e-9, m.fma_flops * 1e-9, m.cores);
  return m;
}

class Run {
 public:
  Run(const Options& options, const std::vector<TestSpec>& tests, const std::map<std::string, ModelFacts>& models,
      const Machine& machine, pagoda::bench::ReadBandwidthProbe& probe, Printer& printer)
      : options_(options),
        instances_(plan_instances(options)),
        tests_(tests),
        models_(models),
        machine_(machine),
        probe_(probe),
        printer_(printer) {}

  void all() {
    for (const Instance& instance : instances_) on(instance);
  }

 private:
  // One engine, every test on it.
  void on(const Instance& instance) {
    pagoda::Engine engine(engine_config(instance, tests_));
    RandomTokens tokens(engine.vocab_size());
    const ModelFacts& model = models_.at(instance.model);
    for (const TestSpec& spec : tests_) {
      const Say say = [&](const std::string& what) {
        if (options_.progress)
          std::fprintf(stderr, "pagoda-bench: benchmark %d/%d: %s %s\n", done_ + 1, total(), spec.name().c_str(),
                       what.c_str());
      };
      const TestResult result = run_test(engine, spec, options_.reps, tokens, say, [&] { return probe_.sample(); });
      printer_.row({machine_, model, instance, result,
                    roofline(result, model, instance.cache_type, instance.threads, machine_)});
      ++done_;
    }
  }

  int total() const { return int(instances_.size() * tests_.size()); }

  const Options& options_;
  const std::vector<Instance> instances_;
  const std::vector<TestSpec>& tests_;
  const std::map<std::string, ModelFacts>& models_;
  const Machine& machine_;
  pagoda::bench::ReadBandwidthProbe& probe_;
  Printer& printer_;
  int done_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const std::vector<TestSpec> tests = plan_tests(options);
    const std::map<std::string, ModelFacts> models = read_models(options, tests);
    pagoda::bench::ReadBandwidthProbe probe;
    const Machine machine = measure_and_report_machine(probe);
    const auto printer = make_printer(options);
    printer->header();
    Run(options, tests, models, machine, probe, *printer).all();
    printer->footer();
    std::fflush(stdout);  // the table ends before the closing line on stderr
    std::fprintf(stderr, "pagoda-bench: load average at end: %s\n", load_average().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-bench: %s\n", e.what());
    return 1;
  }
}
