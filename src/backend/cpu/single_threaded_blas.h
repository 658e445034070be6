// OpenBLAS on the calling thread alone while an object of this class lives. Debian's OpenMP build
// of OpenBLAS takes its thread count from omp_get_max_threads() at every call
// (openblas_set_num_threads is overridden by it), and it splits a product between its threads at
// row and column boundaries that depend on how many there are: the same product came out
// different by an ulp at 1 and 2 threads. Results must not depend on the thread count (the trainer
// changes it while other work holds the CPU). Setting this thread's OpenMP thread count is a
// per-thread variable write, free.
#pragma once

#include <omp.h>

namespace zaya::cpu {

class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(omp_get_max_threads()) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SingleThreadedBlas() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

}  // namespace zaya::cpu
