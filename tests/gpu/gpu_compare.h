// The comparison the GPU tests hold each result to, element by element. No CUDA here: the CPU
// unit tests (tests/unit/test_gpu_compare.cpp) check the comparison itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace zaya::test {

// Every element i of an fp32 result must satisfy
//   |got[i] − want[i]| <= max(rtol · |want[i]|, floor · rms(want)).
// rtol holds each element to its own size. The floor is for elements that are small because terms
// cancelled: their rounding is that of the terms, whose size the reference's RMS gives, not
// their own. With floor <= rtol (rms <= max) no element is allowed more than the former
// whole-tensor measure allowed every element (max|got − want| <= rtol · max|want|), and elements
// below the tensor's largest are held tighter, down to floor · rms for those near zero. Zero rtol
// and floor ask for the same bits (NaN never passes).
struct Tolerance {
  double rtol = 0;
  double floor = 0;
};

inline ::testing::AssertionResult elementwise_close(const std::vector<float>& got,
                                                    const std::vector<float>& want,
                                                    const Tolerance& tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << got.size() << " elements where the reference has " << want.size();
  double squares = 0;
  for (const float w : want) squares += double(w) * double(w);
  const double rms = want.empty() ? 0.0 : std::sqrt(squares / double(want.size()));
  const double floor = tol.floor * rms;
  size_t bad = 0, worst = 0;
  double worst_excess = -1;  // |got − want| / limit, the largest
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    const double limit = std::max(tol.rtol * std::fabs(double(want[i])), floor);
    const double excess = limit > 0 ? err / limit : (err == 0 ? 0.0 : INFINITY);
    if (!(err <= limit)) ++bad;
    if (!(excess <= worst_excess)) {  // NaN becomes the worst
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << want.size() << " elements out of tolerance (rtol " << tol.rtol
         << ", floor " << tol.floor << " x rms " << rms << "); worst at [" << worst << "]: got "
         << got[worst] << ", want " << want[worst] << ", |diff| "
         << std::fabs(double(got[worst]) - double(want[worst])) << " > limit "
         << std::max(tol.rtol * std::fabs(double(want[worst])), floor);
}

}  // namespace zaya::test
