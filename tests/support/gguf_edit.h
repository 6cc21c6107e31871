#pragma once
// Test models made from others: a GGUF copied key by key and tensor by tensor, with changes.

#include <functional>
#include <string>

#include "engine/gguf/gguf_writer.h"

namespace pagoda::test {

// `base` rewritten to the scratch folder as `name` after `edit` changed the writer (which holds
// every key and tensor of `base` by then); its path.
std::string edited_model(const std::string& name, const std::string& base,
                         const std::function<void(GgufWriter&)>& edit);

}  // namespace pagoda::test
