// A vendor's shared library opened at run time (dlopen) and closed with the object: the GPU
// health sources' NVML and AMD SMI (aegis/gpu_health.h), which zaya neither links nor needs.
#pragma once

#include <string>

#include "core/error.h"

namespace zaya::aegis {

class LoadedLibrary {
 public:
  // Opens `file`; zaya::Error "cannot load NAME (FILE): dlopen's reason (HINT)" when it cannot.
  LoadedLibrary(std::string name, std::string file, const std::string& hint);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  const std::string& name() const { return name_; }
  const std::string& file() const { return file_; }
  // Points `f` at the function `symbol`; zaya::Error naming it and `when_missing` when the
  // library has none.
  template <class F>
  void resolve(F& f, const char* symbol, const char* when_missing) const {
    f = reinterpret_cast<F>(address(symbol));
    ZAYA_CHECK(f, name_, " (", file_, ") has no function ", symbol, ": ", when_missing);
  }

 private:
  void* address(const char* symbol) const;
  std::string name_, file_;
  void* handle_ = nullptr;
};

}  // namespace zaya::aegis
