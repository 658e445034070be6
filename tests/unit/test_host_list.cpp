// Aegis's host list (aegis/host_list.h): an Open MPI hostfile read strictly (bad lines named by
// file:line), the good hosts and their slots, and the launch command pointed at a hostfile of
// them (mpirun's flag replaced or added; srun's --exclude).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aegis/host_list.h"
#include "core/error.h"

namespace zaya::aegis {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(HostList, ReadsHostsAndSlotsAndNamesABadLine) {
  const auto hosts = read_hostfile(write("zaya_hosts_ok", "# nodes\nn1 slots=4\n\nn2   # one\n"));
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "n1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(total_slots(good_hosts(hosts, {"n1"})), 1);
  EXPECT_EQ(total_slots(good_hosts(hosts, {"n3"})), 5);
  const std::pair<const char*, const char*> bad[] = {{"n1 cpus=4\n", ":1: expected"},
                                                     {"n1\nn2 slots=0\n", ":2: slots"},
                                                     {"n1 slots=2x\n", ":1: slots"},
                                                     {"n1\nn1\n", "listed twice"},
                                                     {"# none\n", "no host"}};
  for (const auto& [text, says] : bad) {
    try {
      read_hostfile(write("zaya_hosts_bad", text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(HostList, TheCommandIsPointedAtTheGoodHosts) {
  using V = std::vector<std::string>;
  EXPECT_EQ(with_hosts(V{"mpirun", "--hostfile", "all", "-np", "2", "zaya"}, "good", {"n1"}),
            (V{"mpirun", "--hostfile", "good", "-np", "2", "zaya"}));
  EXPECT_EQ(with_hosts(V{"mpiexec", "--machinefile=all", "zaya"}, "good", {"n1"}),
            (V{"mpiexec", "--machinefile=good", "zaya"}));
  EXPECT_EQ(with_hosts(V{"/usr/bin/mpirun", "-np", "2", "zaya"}, "good", {"n1"}),
            (V{"/usr/bin/mpirun", "--hostfile", "good", "-np", "2", "zaya"}));
  EXPECT_EQ(with_hosts(V{"srun", "-n", "8", "zaya"}, "good", {"n1", "n2"}),
            (V{"srun", "--exclude=n1,n2", "-n", "8", "zaya"}));
  EXPECT_EQ(with_hosts(V{"srun", "--exclude=n0", "zaya"}, "good", {"n1"}),
            (V{"srun", "--exclude=n0,n1", "zaya"}));
  EXPECT_THROW(with_hosts(V{"zaya", "train"}, "good", {"n1"}), Error);
}

}  // namespace
}  // namespace zaya::aegis
