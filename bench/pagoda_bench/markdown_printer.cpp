#include "bench/pagoda_bench/markdown_printer.h"

#include <cstdio>
#include <cstdlib>

namespace pagoda::benchtool {

namespace {

std::string format(const char* spec, double a, double b = 0.0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, spec, a, b);
  return buf;
}

std::string size_cell(const Row& r) {
  const double bytes = double(r.model.size_bytes);
  return bytes < 1024.0 * 1024 * 1024 ? format("%.2f MiB", bytes / 1024 / 1024)
                                      : format("%.2f GiB", bytes / 1024 / 1024 / 1024);
}

std::string params_cell(const Row& r) {
  const double n = double(r.model.n_params);
  return n < 1e9 ? format("%.2f M", n / 1e6) : format("%.2f B", n / 1e9);
}

// "0.81 of 1523.40": the fraction reached of a roofline, or nothing where it does not apply.
std::string fraction_of(const std::optional<double>& fraction, const std::optional<double>& bound) {
  return fraction && bound ? format("%.2f of %.2f", *fraction, *bound) : "";
}

std::string phase_rate(const Row& r, const std::vector<double>& samples, int tokens) {
  return r.result.spec.kind == TestKind::Batched && tokens > 0 ? format("%.2f", mean(samples)) : "";
}

// llama-bench shows a parameter's column when it was given more than one value or another
// value than its default.
template <typename T>
bool shown(const std::vector<T>& values, const std::vector<T>& defaults) {
  return values.size() > 1 || values != defaults;
}

}  // namespace

MarkdownPrinter::MarkdownPrinter(const Options& o) {
  const Options& d = default_options();
  columns_ = {{"model", -30, [](const Row& r) { return r.model.type; }},
              {"size", 10, size_cell},
              {"params", 10, params_cell},
              {"backend", -10, [](const Row&) { return std::string("CPU"); }},
              {"threads", 7, [](const Row& r) { return std::to_string(r.instance.threads); }}};
  if (shown(o.n_batch, d.n_batch))
    columns_.push_back({"n_batch", 7, [](const Row& r) { return std::to_string(r.instance.n_batch); }});
  if (shown(o.n_ubatch, d.n_ubatch))
    columns_.push_back({"n_ubatch", 8, [](const Row& r) { return std::to_string(r.instance.n_ubatch); }});
  if (shown(o.cache_types, d.cache_types)) {
    for (const char* name : {"type_k", "type_v"})
      columns_.push_back(
          {name, 6, [](const Row& r) { return std::string(kv_cache_type_name(r.instance.cache_type)); }});
  }
  if (shown(o.use_mmap, d.use_mmap))
    columns_.push_back({"mmap", 4, [](const Row& r) { return std::to_string(r.instance.use_mmap); }});
  columns_.push_back({"test", 15, [](const Row& r) { return r.result.spec.name(); }});
  // One more for the width: "±" is two bytes and printf counts bytes.
  columns_.push_back(
      {"t/s", 20, [](const Row& r) { return format("%.2f ± %.2f", r.result.avg_ts(), r.result.stddev_ts()); }, 1});
  if (!o.n_seqs.empty()) {
    columns_.push_back(
        {"S_PP t/s", 10, [](const Row& r) { return phase_rate(r, r.result.samples_s_pp, r.result.spec.n_prompt); }});
    columns_.push_back(
        {"S_TG t/s", 10, [](const Row& r) { return phase_rate(r, r.result.samples_s_tg, r.result.spec.n_gen); }});
  }
  columns_.push_back({"roofline t/s", 20,
                      [](const Row& r) { return fraction_of(r.roofline.roofline_fraction, r.roofline.roofline_ts); }});
  columns_.push_back({"FMA peak GFLOP/s", 20,
                      [](const Row& r) { return fraction_of(r.roofline.peak_fraction, r.roofline.peak_gflops); }});
}

void MarkdownPrinter::header() {
  std::printf("|");
  for (const Column& c : columns_) std::printf(" %*s |", c.width, c.name);
  std::printf("\n|");
  for (const Column& c : columns_)
    std::printf(" %s%s |", std::string(size_t(std::abs(c.width) - 1), '-').c_str(), c.width > 0 ? ":" : "-");
  std::printf("\n");
  std::fflush(stdout);
}

void MarkdownPrinter::row(const Row& row) {
  std::printf("|");
  for (const Column& c : columns_) std::printf(" %*s |", c.width + c.extra_bytes, c.cell(row).c_str());
  std::printf("\n");
  std::fflush(stdout);
}

void MarkdownPrinter::footer() { std::printf("\nbuild: %s (%d)\n", build_commit().c_str(), build_number()); }

}  // namespace pagoda::benchtool
