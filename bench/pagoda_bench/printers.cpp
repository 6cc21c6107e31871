#include "bench/pagoda_bench/printers.h"

#include <cstdio>
#include <sstream>

#include "bench/pagoda_bench/markdown_printer.h"

namespace pagoda::benchtool {

namespace {

template <typename T>
std::string join(const std::vector<T>& values, const char* separator) {
  std::ostringstream out;  // llama-bench's join: the stream's default six significant digits
  for (size_t i = 0; i < values.size(); ++i) out << (i ? separator : "") << values[i];
  return out.str();
}

// Quoted, with quotes, backslashes and control characters escaped.
std::string quote_json(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) <= 0x1f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string json_value(const Field& f) {
  if (!f.value) return "null";
  switch (f.kind) {
    case Field::Kind::String: return quote_json(*f.value);
    case Field::Kind::Bool: return *f.value == "0" ? "false" : "true";
    default: return *f.value;
  }
}

// A JSON array of objects, each field on its own line, as llama-bench's json printer.
class JsonPrinter : public Printer {
 public:
  void header() override { std::printf("[\n"); }
  void row(const Row& row) override {
    std::printf("%s  {\n", first_ ? "" : ",\n");
    first_ = false;
    for (const Field& f : fields(row)) std::printf("    \"%s\": %s,\n", f.name, json_value(f).c_str());
    std::printf("    \"samples_ns\": [ %s ],\n", join(row.result.samples_ns, ", ").c_str());
    std::printf("    \"samples_ts\": [ %s ]\n", join(row.result.samples_ts, ", ").c_str());
    std::printf("  }");
    std::fflush(stdout);
  }
  void footer() override { std::printf("\n]\n"); }

 private:
  bool first_ = true;
};

class JsonlPrinter : public Printer {
 public:
  void row(const Row& row) override {
    std::printf("{");
    for (const Field& f : fields(row)) std::printf("\"%s\": %s, ", f.name, json_value(f).c_str());
    std::printf("\"samples_ns\": [ %s ],", join(row.result.samples_ns, ", ").c_str());
    std::printf("\"samples_ts\": [ %s ]}\n", join(row.result.samples_ts, ", ").c_str());
    std::fflush(stdout);
  }
};

std::string quote_csv(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The field names, then a line of quoted values per test (fields that do not apply empty).
class CsvPrinter : public Printer {
 public:
  void row(const Row& row) override {
    const std::vector<Field> fs = fields(row);
    std::vector<std::string> cells;
    if (first_) {
      for (const Field& f : fs) cells.push_back(f.name);
      std::printf("%s\n", join(cells, ",").c_str());
      cells.clear();
      first_ = false;
    }
    for (const Field& f : fs) cells.push_back(quote_csv(f.value.value_or("")));
    std::printf("%s\n", join(cells, ",").c_str());
    std::fflush(stdout);
  }

 private:
  bool first_ = true;
};

}  // namespace

std::unique_ptr<Printer> make_printer(const Options& options) {
  switch (options.output) {
    case OutputFormat::Json: return std::make_unique<JsonPrinter>();
    case OutputFormat::Jsonl: return std::make_unique<JsonlPrinter>();
    case OutputFormat::Csv: return std::make_unique<CsvPrinter>();
    case OutputFormat::Markdown: break;
  }
  return std::make_unique<MarkdownPrinter>(options);
}

}  // namespace pagoda::benchtool
