#include "support/gguf_edit.h"

#include "engine/gguf/gguf.h"
#include "support/test_support.h"

namespace pagoda::test {

std::string edited_model(const std::string& name, const std::string& base, const std::function<void(GgufWriter&)>& edit,
                         const std::function<bool(const std::string&)>& keep_tensor) {
  const GgufFile in = GgufFile::open(base);
  GgufWriter w;
  for (const std::string& key : in.keys()) w.set(key, *in.find(key));
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!keep_tensor || keep_tensor(t.name)) w.add_tensor(t.name, t.shape, t.type, in.tensor_bytes(t));
  }
  edit(w);
  const std::string path = scratch_path(name);
  w.write(path);
  return path;
}

}  // namespace pagoda::test
