/* AVX intrinsics the instrumentation does not report: 32-byte loads and stores (clang),
 * streaming stores and a gather (both compilers); `plain` is ordinary code. Only compiled by
 * the tests (`cachescope cc` warns about them), not run. */
#include <immintrin.h>
#include <stdio.h>
#define N 4096
double a[N], b[N], c[N];
int idx[N];
void triad_avx(void) {
  for (int i = 0; i < N; i += 4) {
    __m256d x = _mm256_loadu_pd(&b[i]);
    __m256d y = _mm256_loadu_pd(&c[i]);
    _mm256_storeu_pd(&a[i], _mm256_add_pd(x, y));
  }
}
void copy_nt(void) {
  for (int i = 0; i < N; i += 4)
    _mm256_stream_pd(&a[i], _mm256_load_pd(&b[i]));
}
double gather_sum(void) {
  __m256d s = _mm256_setzero_pd();
  for (int i = 0; i < N; i += 4)
    s = _mm256_add_pd(s, _mm256_i32gather_pd(b, _mm_loadu_si128((__m128i *)&idx[i]), 8));
  double out[4];
  _mm256_storeu_pd(out, s);
  return out[0] + out[1] + out[2] + out[3];
}
void plain(void) {
  for (int i = 0; i < N; i++)
    a[i] = b[i] * 2.0 + c[i];
}
int main(void) {
  triad_avx(); copy_nt(); plain();
  printf("%f\n", gather_sum() + a[5]);
  return 0;
}
