/* test_hip_layout.c: a host emulation of one 64-lane wavefront that checks the
 * MFMA wiring of src/gpu/vendor/tile_amd.cuh without an AMD GPU. The instruction is
 * modelled from the register layouts of v_mfma_f32_16x16x16f16 (AMD matrix
 * instruction calculator, gfx9: A[i][k] in lane 16*(k/4)+i, element k%4;
 * B[k][j] in lane 16*(k/4)+j, element k%4; D[i][j] in lane 16*(i/4)+j,
 * element i%4). The primitives below repeat tile_amd.cuh's index formulas;
 * the test runs the body's two products (S = Q K^T, then O = P V with P the S
 * fragment passed through acc_to_a) and checks every element against the
 * body's FragC contract (row frag_c_row, column frag_c_col(e)). */
#include <math.h>
#include <stdio.h>

enum { LANES = 64, E = 4 };
typedef float Frag[LANES][E];

/* The instruction: D = A B + C, operands in their hardware layouts. */
static void mfma_16x16x16(Frag d, Frag a_op, Frag b_op, Frag c) {
  float A[16][16], B[16][16];
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) {
      const int k = 4 * (l / 16) + e;
      A[l % 16][k] = a_op[l][e];
      B[k][l % 16] = b_op[l][e];
    }
  Frag out;
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) {
      const int i = 4 * (l / 16) + e, j = l % 16;
      float s = c[l][e];
      for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
      out[l][e] = s;
    }
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) d[l][e] = out[l][e];
}

/* tile_amd.cuh's primitives, with at(r, c) = tile[r][c]. */
static int frag_c_row(int l) { return l & 15; }
static int frag_c_col(int l, int e) { return ((l >> 4) << 2) + e; }
static void load_a(Frag a, float t[16][16]) { /* Q: m-rows, k contiguous */
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) a[l][e] = t[l & 15][((l >> 4) << 2) + e];
}
static void load_b_nk(Frag b, float t[16][16]) { /* K: n-rows, k contiguous */
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) b[l][e] = t[l & 15][((l >> 4) << 2) + e];
}
static void load_b_kn(Frag b, float t[16][16]) { /* V: k-rows, n contiguous */
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) b[l][e] = t[((l >> 4) << 2) + e][l & 15];
}
static void mma(Frag c, Frag a, Frag b) { mfma_16x16x16(c, b, a, c); } /* c^T += b^T a^T */
static void acc_to_a(Frag a, Frag c) {
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) a[l][e] = c[l][e];
}

int main(void) {
  float Q[16][16], K[16][16], V[16][16];
  unsigned s = 12345u;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      s = s * 1664525u + 1013904223u;
      Q[i][j] = (float)((s >> 9) % 17) - 8.0f;
      s = s * 1664525u + 1013904223u;
      K[i][j] = (float)((s >> 9) % 13) - 6.0f;
      s = s * 1664525u + 1013904223u;
      V[i][j] = (float)((s >> 9) % 11) - 5.0f;
    }
  Frag qa, kb, vb, sc = {{0}}, pa, oc = {{0}};
  load_a(qa, Q);
  load_b_nk(kb, K);
  mma(sc, qa, kb);
  int bad = 0;
  float S[16][16];
  for (int r = 0; r < 16; r++)
    for (int j = 0; j < 16; j++) {
      S[r][j] = 0.0f;
      for (int d = 0; d < 16; d++) S[r][j] += Q[r][d] * K[j][d];
    }
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++)
      if (sc[l][e] != S[frag_c_row(l)][frag_c_col(l, e)]) bad++;
  printf("S = Q K^T: %d of %d elements off the FragC contract\n", bad, LANES * E);
  /* every row must live in exactly the lanes L, L^16, L^32, L^48 (row_allreduce_*) */
  for (int l = 0; l < LANES; l++)
    if (frag_c_row(l) != frag_c_row(l ^ 16) || frag_c_row(l) != frag_c_row(l ^ 32)) bad++;
  acc_to_a(pa, sc);
  load_b_kn(vb, V);
  mma(oc, pa, vb);
  int bad2 = 0;
  for (int l = 0; l < LANES; l++)
    for (int e = 0; e < E; e++) {
      const int r = frag_c_row(l), c = frag_c_col(l, e);
      float o = 0.0f;
      for (int j = 0; j < 16; j++) o += S[r][j] * V[j][c];
      if (fabsf(oc[l][e] - o) > 0.0f) bad2++;
    }
  printf("O = P V:   %d of %d elements off the FragC contract\n", bad2, LANES * E);
  printf("%s: test_hip_layout\n", bad + bad2 ? "FAIL" : "PASS");
  return bad + bad2 ? 1 : 0;
}
