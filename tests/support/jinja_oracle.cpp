#include "support/jinja_oracle.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "engine/jinja/template.h"
#include "pagoda/error.h"

namespace pagoda::test {

namespace fs = std::filesystem;

namespace {

const char* kPython = "/usr/bin/python3";

std::string oracle_script() { return std::string(PAGODA_SOURCE_DIR) + "/tests/jinja/oracle.py"; }

}  // namespace

std::string jinja_oracle_missing() {
  if (!fs::exists(kPython)) return std::string(kPython) + " is absent";
  const std::string probe = std::string(kPython) + " -c 'import jinja2' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) return "python3's jinja2 module is absent (Debian: python3-jinja2)";
  return "";
}

std::vector<OracleResult> run_jinja_oracle(const nlohmann::ordered_json& cases) {
  const fs::path dir = fs::temp_directory_path();
  const std::string stem = "pagoda_jinja_oracle_" + std::to_string(::getpid());
  const fs::path in = dir / (stem + ".in.json");
  const fs::path out = dir / (stem + ".out.json");
  std::ofstream(in) << cases.dump();
  const std::string command = std::string(kPython) + " " + oracle_script() + " < " + in.string() + " > " + out.string();
  const int status = std::system(command.c_str());
  std::ifstream result_file(out);
  std::stringstream text;
  text << result_file.rdbuf();
  fs::remove(in);
  fs::remove(out);
  if (status != 0) throw std::runtime_error("the jinja2 oracle failed: " + command);
  const auto results = nlohmann::ordered_json::parse(text.str());
  std::vector<OracleResult> rendered;
  for (const auto& r : results) {
    if (r.contains("output")) {
      rendered.push_back({true, r["output"].get<std::string>()});
    } else {
      rendered.push_back({false, r["error"].get<std::string>()});
    }
  }
  return rendered;
}

OracleResult render_with_pagoda(const std::string& source, const nlohmann::ordered_json& context) {
  try {
    return {true, jinja::Template(source).render(context)};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

}  // namespace pagoda::test
