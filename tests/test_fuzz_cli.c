/* test_fuzz_cli.c: a seeded random-mutation fuzz of the CLI's argument parsing.
 * Runs the CLI over and over with command lines mutated from a corpus of good
 * ones, each ending in an option no command takes, so that every run stops in
 * parsing: exit 2 with exactly one line on stderr, or exit 0 after printing
 * help. Any other exit code (1 or 77 would mean a command got past parsing), a
 * signal, a sanitizer report or a hang fails, printing the command line.
 * Usage: test_fuzz_cli path/to/anyattn [seconds (default 3) [seed]] */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_ARGS = 40, MAX_ARG_LEN = 6000, STDERR_CAP = 1 << 16, CHILD_TIMEOUT_MS = 20000 };
#define SENTINEL "--fuzz-end" /* no command takes it, and no option takes it as its value */
#define SANITIZER_EXIT 86     /* a sanitizer's exit code in the children (ASan's default, 1, is the CLI's) */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rng_below(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* Good command lines to mutate from. */
static const char *const corpus[][20] = {
    {"check", "--backend", "cpu", "--quick", "--seed", "0x38d2c4a2", "--filter", "decode", "--device", "0"},
    {"bench", "--backend", "cpu", "--workload", "decode", "--iters", "5", "--dtype", "f16", "--cases", "4x512,p1x64",
     "--max-context", "4096", "--config", "cpu", "--json", "x.json", "--no-flush", "--graph"},
    {"tune", "--out", "x.csv", "--grid", "ibm", "--cells", "0:4", "--name", "h200", "--depth", "3", "--iters", "2",
     "--backend", "cpu", "--dtype", "bf16"},
    {"fit", "--in", "x.csv", "--eval", "--name", "t", "--depth", "4"},
    {"info"},
    {"version"},
    {"--version"},
    {"help", "bench"},
    {"bench", "--config", "m16n64w4s3-k4", "--backend", "cuda", "--workload", "e2e-llama8b"},
    {"bench", "--workload", "cp-prefill", "--ranks-per-node", "2", "--cases", "p1x4096", "--backend", "cpu"},
    {"cp-model", "--rates", "x.json", "--intra-gbs", "360", "--inter-gbs", "45.5", "--gpus-per-node", "8"},
};
enum { CORPUS = sizeof corpus / sizeof corpus[0] };

/* Words the mutations insert: every command, option and kind of value. */
static const char *const dict[] = {
    "info", "check", "bench", "tune", "fit", "cp-model", "help", "version", "--version", "--help", "-h", "--", "-", "",
    "--backend", "--device", "--quick", "--filter", "--seed", "--workload", "--json", "--graph", "--config",
    "--iters", "--dtype", "--kv-dtype", "fp8", "fp8_e4m3fnuz", "--prior-writes", "new-keys", "--cases", "--no-flush", "--max-context", "--stage-kv", "--grid", "--out", "--name", "--depth",
    "--cells", "--in", "--eval", "0", "1", "-1", "010", "08", "0x10", "0x", "0X1f", "99999999999999999999",
    "18446744073709551615", "18446744073709551616", "2147483647", "2147483648", "-2147483649", "1e3", " 1",
    "1 ", "+1", "1x512", "p2x64", "0x512", "1x", "x", ",", "1x512,", ",1x512", "p", "p0x1", "2147483647x2147483647",
    "1:2", ":", "5:", ":5", "-1:3", "999999:1000000", "0:99999999999999999999", "cpu", "cuda", "hip", "auto", "bf16",
    "f16", "f32", "m16n64w4s3", "m16n64w4s3-k4", "m16n64w4s3-k0", "m16n64w4s3-k129", "cpu-k4", "-k", "-k-1", "ibm",
    "full", "default", "e2e-llama8b", "e2e-llama8b-step", "%s%n%s%n", "%999999999d", "\xff\xfe", "\xc3\xa9", "a_b", "A", "=",
    "--iters=5", "---", "--help=1", "cp-model", "cp-prefill", "cp-decode", "--ranks-per-node", "--rates",
    "--intra-gbs", "--inter-gbs", "--gpus-per-node", "0.1", "1.5.2", "."};
enum { DICT = sizeof dict / sizeof dict[0] };

typedef struct {
  int argc;
  char *argv[MAX_ARGS + 3]; /* program, args, sentinel, NULL */
} cmdline;

/* A random string: mostly printable, some control and high bytes, never NUL. */
static char *random_arg(uint64_t *r) {
  const int n = rng_below(r, 8) == 0 ? rng_below(r, MAX_ARG_LEN) : rng_below(r, 24);
  char *s = (char *)malloc((size_t)n + 1);
  if (!s) abort();
  for (int i = 0; i < n; i++) {
    const int k = rng_below(r, 16);
    s[i] = k == 0   ? (char)(1 + rng_below(r, 31))
           : k == 1 ? (char)(128 + rng_below(r, 128))
                    : (char)(32 + rng_below(r, 95));
  }
  s[n] = '\0';
  return s;
}

/* One mutation of the argument list a[0..*n). */
static void mutate(char **a, int *n, uint64_t *r) {
  const int i = *n > 0 ? rng_below(r, *n) : 0;
  switch (rng_below(r, 9)) {
    case 0: /* replace with a dictionary word */
      if (*n == 0) break;
      free(a[i]);
      a[i] = strdup(dict[rng_below(r, DICT)]);
      break;
    case 1: /* replace with random bytes */
      if (*n == 0) break;
      free(a[i]);
      a[i] = random_arg(r);
      break;
    case 2: { /* change, insert or drop one character */
      if (*n == 0) break;
      const size_t len = strlen(a[i]);
      char *s = (char *)malloc(len + 2);
      if (!s) abort();
      const size_t at = (size_t)rng_below(r, (int)len + 1);
      const char c = (char)(1 + rng_below(r, 255));
      const int op = rng_below(r, 3);
      memcpy(s, a[i], at);
      if (op == 0 && at < len) { /* change */
        s[at] = c;
        memcpy(s + at + 1, a[i] + at + 1, len - at);
      } else if (op == 1 || at == len) { /* insert */
        s[at] = c;
        memcpy(s + at + 1, a[i] + at, len - at + 1);
      } else { /* drop */
        memcpy(s + at, a[i] + at + 1, len - at);
      }
      free(a[i]);
      a[i] = s;
      break;
    }
    case 3:
    case 4: /* insert a dictionary word */
      if (*n >= MAX_ARGS) break;
      memmove(a + i + 1, a + i, (size_t)(*n - i) * sizeof *a);
      a[i] = strdup(dict[rng_below(r, DICT)]);
      (*n)++;
      break;
    case 5: /* delete */
      if (*n == 0) break;
      free(a[i]);
      memmove(a + i, a + i + 1, (size_t)(*n - i - 1) * sizeof *a);
      (*n)--;
      break;
    case 6: /* duplicate */
      if (*n == 0 || *n >= MAX_ARGS) break;
      memmove(a + i + 1, a + i, (size_t)(*n - i) * sizeof *a);
      a[i + 1] = strdup(a[i]);
      (*n)++;
      break;
    case 7: { /* swap two */
      if (*n < 2) break;
      const int j = rng_below(r, *n);
      char *t = a[i];
      a[i] = a[j];
      a[j] = t;
      break;
    }
    default: { /* glue a dictionary word to the end */
      if (*n == 0) break;
      const char *w = dict[rng_below(r, DICT)];
      const size_t la = strlen(a[i]), lw = strlen(w);
      if (la + lw > MAX_ARG_LEN) break;
      char *s = (char *)malloc(la + lw + 1);
      if (!s) abort();
      memcpy(s, a[i], la);
      memcpy(s + la, w, lw + 1);
      free(a[i]);
      a[i] = s;
      break;
    }
  }
  for (int k = 0; k < *n; k++)
    if (!a[k]) abort(); /* strdup failed */
}

static void build(cmdline *c, const char *cli, uint64_t *r) {
  char *a[MAX_ARGS];
  int n = 0;
  const int src = rng_below(r, CORPUS);
  for (int k = 0; k < 20 && corpus[src][k]; k++) a[n++] = strdup(corpus[src][k]);
  const int muts = 1 + rng_below(r, 4);
  for (int m = 0; m < muts; m++) mutate(a, &n, r);
  c->argv[0] = strdup(cli);
  for (int k = 0; k < n; k++) c->argv[1 + k] = a[k];
  c->argv[1 + n] = strdup(SENTINEL);
  c->argv[2 + n] = NULL;
  c->argc = n + 2;
}

static void release(cmdline *c) {
  for (int k = 0; k < c->argc; k++) free(c->argv[k]);
}

/* Prints the command line as a shell would take it (single-quoted words),
 * each word cut after 200 bytes: the seed reproduces it whole. */
static void print_cmdline(const cmdline *c) {
  for (int k = 0; k < c->argc; k++) {
    putchar(k ? ' ' : '\t');
    putchar('\'');
    const char *p = c->argv[k];
    for (int n = 0; *p && n < 200; p++, n++) {
      if (*p == '\'') fputs("'\\''", stdout);
      else if ((unsigned char)*p < 32 || (unsigned char)*p >= 127) printf("'$'\\x%02x''", (unsigned char)*p);
      else putchar(*p);
    }
    putchar('\'');
    if (*p) printf("...(%zu bytes)", strlen(c->argv[k]));
  }
  putchar('\n');
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs one command line; returns 0 when it kept the contract, else prints why. */
static int run_one(const cmdline *c, char *err, size_t cap) {
  int fd[2];
  if (pipe(fd)) {
    perror("test_fuzz_cli: pipe");
    exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    perror("test_fuzz_cli: fork");
    exit(1);
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(fd[1], 2);
    close(fd[0]);
    execv(c->argv[0], c->argv);
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0;
  int timed_out = 0;
  const double t0 = now_s();
  for (;;) {
    struct pollfd p = {fd[0], POLLIN, 0};
    const int left = CHILD_TIMEOUT_MS - (int)(1e3 * (now_s() - t0));
    const int ready = left > 0 ? poll(&p, 1, left) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = 1;
      kill(pid, SIGKILL);
      break;
    }
    char buf[4096];
    const ssize_t got = read(fd[0], buf, sizeof buf);
    if (got <= 0) break;
    const size_t keep = len + (size_t)got < cap - 1 ? (size_t)got : cap - 1 - len;
    memcpy(err + len, buf, keep);
    len += keep;
  }
  err[len] = '\0';
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}

  const char *why = NULL;
  int lines = 0;
  for (size_t k = 0; k < len; k++) lines += err[k] == '\n';
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (timed_out) why = "no exit within the time limit";
  else if (WIFSIGNALED(status)) why = "killed by a signal";
  else if (strstr(err, "Sanitizer") || strstr(err, "runtime error:")) why = "a sanitizer report";
  else if (code == 2 && lines != 1) why = "exit 2 without exactly one line on stderr";
  else if (code != 0 && code != 2) why = "an exit code other than 0 (help) or 2 (bad command line)";
  if (!why) return 0;
  printf("FAIL: %s (exit %d%s%s):\n", why, code, WIFSIGNALED(status) ? ", signal " : "",
         WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "");
  print_cmdline(c);
  printf("stderr (%zu bytes):\n%.2000s\n", len, err);
  return 1;
}

/* Adds `opt` to the sanitizer options variable `var` (keeping the caller's). */
static void add_option(const char *var, const char *opt) {
  const char *old = getenv(var);
  char buf[1024];
  snprintf(buf, sizeof buf, "%s%s%s", old ? old : "", old && old[0] ? ":" : "", opt);
  setenv(var, buf, 1);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: test_fuzz_cli path/to/anyattn [seconds [seed]]\n");
    return 2;
  }
  const char *cli = argv[1];
  if (access(cli, X_OK) != 0) {
    fprintf(stderr, "test_fuzz_cli: '%s' is not an executable\n", cli);
    return 1;
  }
  const double seconds = argc > 2 ? atof(argv[2]) : 3.0;
  uint64_t seed;
  if (argc > 3) {
    seed = strtoull(argv[3], NULL, 0);
  } else {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t s = (uint64_t)t.tv_sec * 1000000007ull ^ (uint64_t)t.tv_nsec;
    seed = rng_next(&s) & 0xFFFFFFFFull;
  }
  printf("test_fuzz_cli: seed 0x%llx, %.1f s (rerun: test_fuzz_cli %s %g 0x%llx)\n", (unsigned long long)seed,
         seconds, cli, seconds, (unsigned long long)seed);
  fflush(stdout);
  char opt[32];
  snprintf(opt, sizeof opt, "exitcode=%d", SANITIZER_EXIT);
  add_option("ASAN_OPTIONS", opt);
  add_option("UBSAN_OPTIONS", opt);
  add_option("LSAN_OPTIONS", opt);

  static char err[STDERR_CAP];
  uint64_t r = seed;
  int runs = 0, fails = 0, helps = 0;
  const double t0 = now_s();
  while (now_s() - t0 < seconds && fails < 5) {
    cmdline c;
    build(&c, cli, &r);
    const int before = fails;
    fails += run_one(&c, err, sizeof err);
    if (fails == before && err[0] == '\0') helps++; /* exit 0: help, on stdout */
    release(&c);
    runs++;
  }
  printf("test_fuzz_cli: %d command lines in %.1f s, %d printed help, %d failed (seed 0x%llx)\n", runs,
         now_s() - t0, helps, fails, (unsigned long long)seed);
  return fails ? 1 : 0;
}
