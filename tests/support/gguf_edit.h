#pragma once
// Test models made from others: a GGUF copied key by key and tensor by tensor, with changes.

#include <functional>
#include <string>

#include "engine/gguf/gguf_writer.h"

namespace pagoda::test {

// `base` rewritten to the scratch folder as `name` after `edit` changed the writer (which holds
// every key of `base` and every tensor `keep_tensor` keeps, all when it is empty, by then); its path.
std::string edited_model(const std::string& name, const std::string& base, const std::function<void(GgufWriter&)>& edit,
                         const std::function<bool(const std::string&)>& keep_tensor = {});

}  // namespace pagoda::test
