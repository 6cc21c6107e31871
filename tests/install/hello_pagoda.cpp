// An application on the installed public API only: load a model, lay a chat out in its
// template, generate greedily, print the text.
//   hello_pagoda MODEL.gguf

#include <cstdio>
#include <exception>

#include <pagoda/engine.h>
#include <pagoda/error.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hello_pagoda MODEL.gguf\n");
    return 2;
  }
  try {
    pagoda::Engine engine({.model_path = argv[1], .threads = 1, .kv_pages = 64});
    pagoda::Request r;
    r.prompt_ids = engine.tokenize(engine.apply_chat_template({{"user", "Once upon a time"}}), engine.add_bos(), true);
    r.sampling.temperature = 0;
    r.max_new_tokens = 8;
    const pagoda::Completion c = engine.submit(r).get();
    std::printf("format %s, %zu tokens: %s\n", engine.chat_format().family.c_str(), c.token_ids.size(), c.text.c_str());
    return c.token_ids.size() == 8 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello_pagoda: %s\n", e.what());
    return 1;
  }
}
