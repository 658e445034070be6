#include "aegis/host_list.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace zaya::aegis {

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "--hostfile: cannot read '", path, "'");
  std::vector<HostSlots> hosts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    HostSlots h;
    if (!(words >> h.host)) continue;  // blank or a comment
    std::string word;
    while (words >> word) {
      ZAYA_CHECK(word.rfind("slots=", 0) == 0, path, ":", n, ": expected 'HOST [slots=N]', got '",
                 word, "'");
      try {
        size_t used = 0;
        h.slots = std::stoi(word.substr(6), &used);
        ZAYA_CHECK(used == word.size() - 6 && h.slots >= 1, "");
      } catch (const std::exception&) {
        ZAYA_FAIL(path, ":", n, ": slots must be a positive integer, got '", word, "'");
      }
    }
    for (const HostSlots& other : hosts)
      ZAYA_CHECK(other.host != h.host, path, ":", n, ": host '", h.host, "' is listed twice");
    hosts.push_back(h);
  }
  ZAYA_CHECK(!hosts.empty(), "--hostfile ", path, ": no host listed");
  return hosts;
}

std::vector<HostSlots> good_hosts(const std::vector<HostSlots>& all,
                                  const std::vector<std::string>& bad) {
  std::vector<HostSlots> good;
  for (const HostSlots& h : all)
    if (std::find(bad.begin(), bad.end(), h.host) == bad.end()) good.push_back(h);
  return good;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const HostSlots& h : hosts) n += h.slots;
  return n;
}

void write_hostfile(const std::string& path, const std::vector<HostSlots>& hosts) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    for (const HostSlots& h : hosts) out << h.host << " slots=" << h.slots << "\n";
    ZAYA_CHECK(bool(out.flush()), "aegis: cannot write ", tmp);
  }
  std::filesystem::rename(tmp, path);
}

std::vector<std::string> with_hosts(std::vector<std::string> command, const std::string& hostfile,
                                    const std::vector<std::string>& bad) {
  std::string excluded;
  for (const std::string& h : bad) excluded += (excluded.empty() ? "" : ",") + h;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    if ((a == "--hostfile" || a == "-hostfile" || a == "--machinefile" || a == "-machinefile") &&
        i + 1 < command.size()) {
      command[i + 1] = hostfile;
      return command;
    }
    for (const char* prefix : {"--hostfile=", "--machinefile="})
      if (a.rfind(prefix, 0) == 0) {
        command[i] = prefix + hostfile;
        return command;
      }
  }
  const std::string launcher = command.empty() ? "" : std::filesystem::path(command[0]).filename();
  if (launcher == "mpirun" || launcher == "mpiexec" || launcher == "orterun") {
    command.insert(command.begin() + 1, {"--hostfile", hostfile});
    return command;
  }
  if (launcher == "srun") {
    for (std::string& a : command)
      if (a.rfind("--exclude=", 0) == 0) {  // the user's exclusions stay
        a += (a.size() > 10 ? "," : "") + excluded;
        return command;
      }
    command.insert(command.begin() + 1, "--exclude=" + excluded);
    return command;
  }
  ZAYA_FAIL("--hostfile: the launch command '", launcher,
            "' is neither mpirun/mpiexec nor srun, so aegis cannot leave a host out of it");
}

}  // namespace zaya::aegis
