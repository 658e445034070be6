#include "aegis/loaded_library.h"

#include <dlfcn.h>

namespace zaya::aegis {

LoadedLibrary::LoadedLibrary(std::string name, std::string file, const std::string& hint)
    : name_(std::move(name)), file_(std::move(file)) {
  handle_ = dlopen(file_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    ZAYA_FAIL("cannot load ", name_, " (", file_, "): ", why ? why : "unknown dlopen error", " (",
              hint, ")");
  }
}

LoadedLibrary::~LoadedLibrary() {
  dlclose(handle_);
}

void* LoadedLibrary::address(const char* symbol) const {
  return dlsym(handle_, symbol);
}

}  // namespace zaya::aegis
