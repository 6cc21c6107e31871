#pragma once
// The --cache-type f32|f16|bf16|q8_0 flag of the example programs: the KV cache's element type
// (llama.cpp's -ctk/-ctv, one type for keys and values here).

#include <string>

#include "examples/common/args.h"
#include "pagoda/kv_cache_type.h"

namespace pagoda::cli {

// The flag's type, or f16 when absent; a clear error for any other name.
inline KvCacheType cache_type_flag(const Args& args) {
  const std::string name = args.get("--cache-type", "f16");
  if (const auto type = parse_kv_cache_type(name)) return *type;
  throw Error("--cache-type must be f32, f16, bf16 or q8_0, got '" + name + "'");
}

}  // namespace pagoda::cli
