#include <memory>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
#include "dist/local_communicator.h"
#ifdef ZAYA_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif

namespace zaya::dist {

std::unique_ptr<Communicator> make_communicator() {
  const LaunchInfo launch = detect_launch();
#ifdef ZAYA_HAVE_MPI
  if (mpi_active()) return std::make_unique<MpiCommunicator>();
  ZAYA_CHECK(!launch.launched || launch.world_size == 1, "launched as rank ", launch.rank, " of ",
             launch.world_size, " (", launch.source,
             ") but MPI is not initialised: create a zaya::dist::DistContext in main() first");
#endif
  ZAYA_CHECK(!launch.launched || launch.world_size == 1, "launched as rank ", launch.rank, " of ",
             launch.world_size, " (", launch.source,
             ") but this zaya was built without MPI: install libopenmpi-dev openmpi-bin "
             "(scripts/setup.sh) and rebuild, or run a single process");
  return std::make_unique<LocalCommunicator>();
}

}  // namespace zaya::dist
