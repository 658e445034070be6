// The communicator of the MPI test binary (set up in test_mpi_communicator.cpp's main).
#pragma once

#include "dist/communicator.h"

namespace zaya::dist {
extern Communicator* g_comm;
}
