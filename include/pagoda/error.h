#pragma once
// The one exception type pagoda throws for bad input: malformed model files, bad requests,
// bad flags. The message names what was wrong and, for files, which file.

#include <stdexcept>
#include <string>

namespace pagoda {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace pagoda
