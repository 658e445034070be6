// Reading a whole JSON file, with errors that name the file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace zaya {

// `what` describes the file in the error when it cannot be opened ("tokens file").
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace zaya
