#include "dist/rank_grid.h"

#include "core/error.h"

namespace zaya::dist {

RankGrid make_rank_grid(Communicator& world, int context, const std::string& where,
                        const std::string& set_by) {
  const int n = world.world_size(), r = world.rank();
  ZAYA_CHECK(context >= 1 && n % context == 0, where, where.empty() ? "" : ": ",
             "context parallel ", context, " (", set_by, ") must divide the ", n,
             " ranks of this job");
  RankGrid g;
  g.context = context;
  g.data = n / context;
  g.data_rank = r / context;
  if (context > 1) {
    g.context_comm = world.split(r / context, r % context);
    g.data_comm = world.split(r % context, r / context);
  }
  return g;
}

}  // namespace zaya::dist
