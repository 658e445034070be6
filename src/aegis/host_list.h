// The hosts a supervised job runs on, and a relaunch that leaves the bad ones out (issue 42,
// point 5). The job's hosts come from an Open MPI hostfile (`--hostfile`: one host per line,
// optionally `slots=N`, `#` comments); a host marked bad (a mark_bad_host rule) is left out of
// every later launch: Aegis writes the good hosts to a hostfile of its own under OUT/aegis/,
// points the launch command at it (mpirun's --hostfile / --machinefile; srun gets --exclude),
// and sets the rank count to the slots left. A relaunch that would run fewer ranks than the
// minimum is refused. The checkpoint reshapes to the new world size on resume, as it can.
#pragma once

#include <string>
#include <vector>

namespace zaya::aegis {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// Throws zaya::Error naming file:line for a line that is not `HOST [slots=N]`, and for a file
// with no host or one host listed twice.
std::vector<HostSlots> read_hostfile(const std::string& path);

// The hosts of `all` that are not in `bad`, in order.
std::vector<HostSlots> good_hosts(const std::vector<HostSlots>& all,
                                  const std::vector<std::string>& bad);
int total_slots(const std::vector<HostSlots>& hosts);

// `hosts` as a hostfile at `path` (written whole, then renamed).
void write_hostfile(const std::string& path, const std::vector<HostSlots>& hosts);

// The launch command pointed at `hostfile`: the value of its --hostfile, -hostfile,
// --machinefile or -machinefile replaced (or `--hostfile PATH` added after an mpirun or mpiexec);
// for srun, the bad hosts added to its --exclude instead. Throws when the command is neither.
std::vector<std::string> with_hosts(std::vector<std::string> command, const std::string& hostfile,
                                    const std::vector<std::string>& bad);

}  // namespace zaya::aegis
