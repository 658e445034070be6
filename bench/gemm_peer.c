/* The peer of `zaya bench gemm`: OpenBLAS's cblas_sgemm called directly, with OpenBLAS's own
 * threading (all OpenMP threads), timed the same way (one warm-up call, then the best of 3 batches
 * of calls lasting MIN_TIME / 3 seconds each). Shares no code with zaya.
 * Usage: gemm_peer MIN_TIME M,N,K,TA,TB ...   prints "M N K TA TB GFLOP/s" per shape, and the
 * kernels OpenBLAS runs on standard error. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  fprintf(stderr, "%s\n", openblas_get_corename());
  if (argc < 3) {
    fprintf(stderr, "usage: gemm_peer MIN_TIME M,N,K,TA,TB ...\n");
    return 2;
  }
  const double min_time = atof(argv[1]);
  for (int i = 2; i < argc; ++i) {
    int m, n, k, ta, tb;
    if (sscanf(argv[i], "%d,%d,%d,%d,%d", &m, &n, &k, &ta, &tb) != 5) {
      fprintf(stderr, "gemm_peer: bad shape '%s'\n", argv[i]);
      return 2;
    }
    float* a = malloc(sizeof(float) * (size_t)m * k);
    float* b = malloc(sizeof(float) * (size_t)k * n);
    float* c = calloc((size_t)m * n, sizeof(float));
    srand(1);
    for (size_t j = 0; j < (size_t)m * k; ++j) a[j] = 2.0f * rand() / RAND_MAX - 1.0f;
    for (size_t j = 0; j < (size_t)k * n; ++j) b[j] = 2.0f * rand() / RAND_MAX - 1.0f;
    const int lda = ta ? m : k, ldb = tb ? k : n;
    double t0 = now();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    double once = now() - t0;
    if (once < 1e-7) once = 1e-7;
    long reps = (long)(min_time / 3 / once);
    if (reps < 1) reps = 1;
    double best = 1e300;
    for (int batch = 0; batch < 3; ++batch) {
      t0 = now();
      for (long r = 0; r < reps; ++r)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
      const double per = (now() - t0) / (double)reps;
      if (per < best) best = per;
    }
    printf("%d %d %d %d %d %.3f\n", m, n, k, ta, tb, 2.0 * m * n * k / best * 1e-9);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
