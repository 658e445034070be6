// Stand-ins for a backend plugin that the loader must refuse (test_device_select.cpp): built with
// ZAYA_FAKE_PLUGIN_WRONG_ABI, a plugin whose table comes from "another build"; without it, a
// shared library with no zaya_backend_plugin entry at all.
#include "backend/plugin_api.h"

#ifdef ZAYA_FAKE_PLUGIN_WRONG_ABI
extern "C" __attribute__((visibility("default"))) const zaya::BackendPlugin* zaya_backend_plugin() {
  static const zaya::BackendPlugin api{
      "0123456789abcdef", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  return &api;
}
#else
extern "C" __attribute__((visibility("default"))) int zaya_something_else() {
  return 1;
}
#endif
