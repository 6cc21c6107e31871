#pragma once
// Python's jinja2 as the reference for pagoda's chat template interpreter: tests/jinja/oracle.py
// run by /usr/bin/python3 renders a batch of (template, context) cases as transformers'
// apply_chat_template does.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::test {

struct OracleResult {
  bool ok = false;
  std::string output;  // the rendering, or jinja2's error
};

// Why the oracle cannot run here (no /usr/bin/python3 or no jinja2 module), or "" when it can.
std::string jinja_oracle_missing();

// One result per case of `cases`, a JSON array of {"template", "context"}.
std::vector<OracleResult> run_jinja_oracle(const nlohmann::ordered_json& cases);

// pagoda's rendering of one case, in the same form: the output, or the error's message.
OracleResult render_with_pagoda(const std::string& source, const nlohmann::ordered_json& context);

}  // namespace pagoda::test
