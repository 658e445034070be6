#include "backend/cpu/cca_decode_ops.h"

#include <cstring>
#include <memory>

#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// The grouped convolution's sums run kChannelLanes channels side by side in the lanes of a vector,
// each lane one channel's chain over j as alone (8 lanes on the AVX2 and AVX-512 paths, 4 on the
// baseline's 16-byte registers).
constexpr int kChannelLanes = ZAYA_CPU_VECTOR_FLOATS >= 8 ? 8 : 4;
typedef float ChannelVec __attribute__((vector_size(kChannelLanes * sizeof(float))));
typedef float UnalignedChannelVec
    __attribute__((vector_size(kChannelLanes * sizeof(float)), aligned(4), may_alias));

// Rows whose sums of a channel block advance together: 2 · 4 independent chains hide the adds'
// latency (a lone row's two chains waited on it), and the rows share each weight load.
constexpr int kConvRowsTogether = 4;

struct DecodeConvShape {
  int n, nq, nk, d, C, P;
};

// The grouped convolution z = W0·a0 + W1·a1 + bias of rows r0 .. r0 + R of one head group, from
// its depthwise rows a ([n][2][d]) and regrouped weights `sided`.
template <int R>
void decode_grouped_sums(float* z_out, const float* a, const float* sided, const float* conv1_b,
                         const DecodeConvShape& sh, int c_begin, int r0) {
  const int d = sh.d;
  for (int b = 0; b < d; b += kChannelLanes) {
    const float* wb = sided + size_t(b) * 2 * d;
    ChannelVec s0[R] = {}, s1[R] = {};
    for (int j = 0; j < d; ++j) {
      const ChannelVec w0 =
          *reinterpret_cast<const UnalignedChannelVec*>(wb + size_t(2 * j) * kChannelLanes);
      const ChannelVec w1 =
          *reinterpret_cast<const UnalignedChannelVec*>(wb + size_t(2 * j + 1) * kChannelLanes);
      for (int q = 0; q < R; ++q) {
        const float* a0 = a + size_t(r0 + q) * 2 * d;
        s0[q] += w0 * a0[j];
        s1[q] += w1 * a0[d + j];
      }
    }
    const ChannelVec bias = *reinterpret_cast<const UnalignedChannelVec*>(conv1_b + c_begin + b);
    for (int q = 0; q < R; ++q) {
      const ChannelVec zc = s0[q] + s1[q] + bias;
      std::memcpy(z_out + size_t(r0 + q) * sh.C + c_begin + b, &zc, sizeof zc);
    }
  }
}

// Head group `group` (its d channels read only the group's d channels of the depthwise rows) of
// every row: a = the depthwise rows of the group's channels, [n][2][d]; sided = the group's
// grouped weights as [block][j][tap][lane], one tap of kChannelLanes channels one vector.
void decode_conv_group(float* z_out, const float* proj, const float* window, const int32_t* slots,
                       const CcaDecodeStep& s, const DecodeConvShape& sh, int group, float* a,
                       float* sided) {
  const int d = sh.d, C = sh.C, c_begin = group * d;
  for (int r = 0; r < sh.n; ++r) {
    const float* u = proj + size_t(r) * sh.P;  // q0 ‖ k0: this position's row of the conv input
    const float* u2 = window + size_t(slots[r]) * 2 * C;
    const float* u1 = u2 + C;
    float* a0 = a + size_t(r) * 2 * d;
    float* a1 = a0 + d;
    for (int i = 0; i < d; ++i) {
      const int ch = c_begin + i;
      const float w0 = s.conv0_w[2 * ch], w1 = s.conv0_w[2 * ch + 1];
      a0[i] = s.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
      a1[i] = s.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
    }
  }
  if (d % kChannelLanes == 0) {
    for (int b = 0; b < d; b += kChannelLanes)
      for (int jt = 0; jt < 2 * d; ++jt)
        for (int l = 0; l < kChannelLanes; ++l)
          sided[(size_t(b) * 2 * d + size_t(jt) * kChannelLanes) + size_t(l)] =
              s.conv1_w[size_t(c_begin + b + l) * 2 * d + size_t(jt)];
    int r0 = 0;
    for (; r0 + kConvRowsTogether <= sh.n; r0 += kConvRowsTogether)
      decode_grouped_sums<kConvRowsTogether>(z_out, a, sided, s.conv1_b, sh, c_begin, r0);
    for (; r0 < sh.n; ++r0) decode_grouped_sums<1>(z_out, a, sided, s.conv1_b, sh, c_begin, r0);
  } else {
    for (int r = 0; r < sh.n; ++r) {
      const float* a0 = a + size_t(r) * 2 * d;
      const float* a1 = a0 + d;
      for (int ch = c_begin; ch < c_begin + d; ++ch) {
        const float* wc = s.conv1_w + size_t(ch) * d * 2;
        float s0 = 0.0f, s1 = 0.0f;
        for (int j = 0; j < d; ++j) {
          s0 += wc[2 * j] * a0[j];
          s1 += wc[2 * j + 1] * a1[j];
        }
        z_out[size_t(r) * C + ch] = s0 + s1 + s.conv1_b[ch];
      }
    }
  }
  // The q-k-mean skip of the group's channels: a query head's z gains half its q0 and half its
  // key head's k0; a key head's, half the mean of its query heads' q0 and half its k0.
  const int g = sh.nq / sh.nk, Dq = sh.nq * d;
  for (int r = 0; r < sh.n; ++r) {
    const float* q0 = proj + size_t(r) * sh.P;
    const float* k0 = q0 + Dq;
    float* z = z_out + size_t(r) * C;
    if (group < sh.nq) {
      const int h = group;
      const float* kj = k0 + (h / g) * d;
      for (int i = 0; i < d; ++i) z[h * d + i] += 0.5f * (q0[h * d + i] + kj[i]);
    } else {
      const int j = group - sh.nq;
      for (int i = 0; i < d; ++i) {
        float mean = 0.0f;
        for (int h = j * g; h < (j + 1) * g; ++h) mean += q0[h * d + i];
        mean /= float(g);
        z[Dq + j * d + i] += 0.5f * mean + 0.5f * k0[j * d + i];
      }
    }
  }
}

}  // namespace

void cca_decode_conv(float* z_out, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s) {
  DecodeConvShape sh;
  sh.n = s.n;
  sh.nq = s.nq;
  sh.nk = s.nk;
  sh.d = s.d;
  sh.C = (s.nq + s.nk) * s.d;
  sh.P = sh.C + s.nk * s.d;
  // Head groups are the unit of work: a group's channels need only its own channels of the
  // depthwise rows, so a thread computes those, regroups the group's weights (once per call,
  // shared by every row) and its z of every row, with no other thread's results. About 2d + 6
  // multiply-adds a channel. Batch 16 of the small config (12 µs on one core, 14 on two, stop
  // 54: the fork and join cost more than half the work) stays on the calling thread.
  const int groups = s.nq + s.nk;
  for_ranges(groups, worth_threads(int64_t(s.n) * sh.C * s.d, int64_t(1) << 18),
             [&](int64_t first, int64_t last) {
               // Uninitialised: value-initialisation would be a memset of every element.
               const auto a = std::make_unique_for_overwrite<float[]>(size_t(s.n) * 2 * s.d);
               const auto sided = std::make_unique_for_overwrite<float[]>(size_t(s.d) * 2 * s.d);
               for (int group = int(first); group < int(last); ++group)
                 decode_conv_group(z_out, proj, window, slots, s, sh, group, a.get(), sided.get());
             });
}

void cca_decode_advance(float* window, float* v_prev, float* kv, const int64_t* kv_rows,
                        const float* qkn, const float* proj, const int32_t* slots,
                        const CcaDecodeStep& s) {
  const int Dq = s.nq * s.d, Dk = s.nk * s.d, C = Dq + Dk, P = C + Dk, half = Dk / 2;
  for (int r = 0; r < s.n; ++r) {
    const float* u = proj + size_t(r) * P;
    float* prev = v_prev + size_t(slots[r]) * half;
    if (kv_rows[2 * r] >= 0) {
      float* k_slot = kv + size_t(kv_rows[2 * r]) * Dk;
      float* v_slot = kv + size_t(kv_rows[2 * r + 1]) * Dk;
      std::memcpy(k_slot, qkn + size_t(r) * C + Dq, sizeof(float) * Dk);
      std::memcpy(v_slot, u + C, sizeof(float) * half);
      std::memcpy(v_slot + half, prev, sizeof(float) * half);
    }
    float* w = window + size_t(slots[r]) * 2 * C;
    std::memmove(w, w + C, sizeof(float) * C);
    std::memcpy(w + C, u, sizeof(float) * C);
    std::memcpy(prev, u + C + half, sizeof(float) * half);
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
