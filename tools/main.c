/* main.c: the `anyattn` command-line tool and its option parsing. `info` lists
 * backends and devices, `check` runs the conformance suite against the
 * double-precision reference, `bench` times the shared workloads, `tune` and
 * `fit` make decision trees, `cp-model` predicts context parallelism, `report`
 * hands over to the Python report (python -m anyattn.report). Exit codes: 0
 * success, 1 failure, 2 bad command line (one line on stderr), 77 no device for
 * the backend. */
#define _DEFAULT_SOURCE /* readlink, setenv */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "anyattn.h"
#include "bench.h"
#include "conformance.h"
#include "cp_bench.h"
#include "cp_model.h"
#include "tune.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2, CLI_NO_DEVICE = 77 };

static const char *usage_text =
    "usage: anyattn <command> [options]\n"
    "  info                                   version, backends, devices, kernel configs\n"
    "  check [--backend B] [--device N] [--quick] [--filter TEXT] [--seed N]\n"
    "                                         conformance suite vs the double-precision reference\n"
    "  bench [--backend B] [--device N] [--workload W] [--json FILE] [--graph]\n"
    "        [--config NAME[-kS]] [--iters N] [--dtype bf16|f16|f32]\n"
    "        [--kv-dtype fp8|fp8_e4m3fnuz] [--cases BxC,pBxL,...] [--filter TEXT] [--list] [--no-flush] [--max-context N]\n"
    "        [--stage-kv N] [--ranks-per-node N]\n"
    "                                         time a workload against the measured ceilings\n"
    "  cp-model [--rates FILE.json] [--intra-gbs G] [--inter-gbs G] [--gpus-per-node N]\n"
    "                                         predict context-parallel prefill: ring, two-level\n"
    "  tune [--backend B] [--device N] [--grid ibm|full|decode|full-decode] --out FILE.csv [--name ID]\n"
    "       [--iters N] [--depth D] [--dtype T] [--head-dim D] [--kv-dtype T] [--cells FROM:TO]\n"
    "                                         sweep every config over a grid, fit a decision tree\n"
    "  fit --in FILE.csv ([--name ID] [--depth D] | --eval)\n"
    "                                         fit the tree of a sweep, or score the library's on it\n"
    "  report [--out DIR] [--quick] [--tune] ...\n"
    "                                         anyattn and every importable peer side by side, with\n"
    "                                         plots (python3 -m anyattn.report; its --help has the rest)\n"
    "  version                                the version (also: anyattn --version)\n"
    "  help [COMMAND]                         this text, or COMMAND's (also: anyattn COMMAND --help)\n"
    "backends: auto (default: best found), cpu, cuda, hip\n"
    "numbers are decimal (--seed also takes 0x hex)\n"
    "exit codes: 0 success, 1 failure (a FAIL, a runtime or file error),\n"
    "            2 bad command line (one line on stderr), 77 no device for the backend\n";

/* What each command takes (`flags`: its options, space separated) and says
 * for `anyattn help NAME`. */
typedef struct {
  const char *name, *flags, *help;
} cli_command;

static const cli_command commands[] = {
    {"info", "",
     "usage: anyattn info\n"
     "Prints the library version; for each backend whether it is compiled in, its\n"
     "devices, the decision tree that picks configs on each, and its kernel configs.\n"},
    {"check", "--backend --device --quick --filter --seed",
     "usage: anyattn check [--backend B] [--device N] [--quick] [--filter TEXT] [--seed N]\n"
     "Runs the conformance suite on one backend against the double-precision\n"
     "reference: one PASS, FAIL or SKIP line (with the reason) per case.\n"
     "  --backend B     auto (default: the best found), cpu, cuda, hip\n"
     "  --device N      device index, 0 to 1023 (default 0)\n"
     "  --quick         the quick suite (the one ctest runs)\n"
     "  --filter TEXT   only the cases whose name contains TEXT\n"
     "  --seed N        data seed, 1 to 18446744073709551615, decimal or 0x hex\n"
     "                  (default: $ANYATTN_SEED, else from the clock; printed either way)\n"
     "exit codes: 0 all ran cases pass, 1 a FAIL or no case ran, 2 bad command line,\n"
     "            77 the backend has no device (or is not compiled in)\n"},
    {"bench",
     "--backend --device --workload --json --graph --config --iters --dtype --kv-dtype --prior-writes --hints --cases "
     "--filter --list --no-flush --max-context --stage-kv --ranks-per-node --head-dim",
     "usage: anyattn bench [options]\n"
     "Times each case of a workload (median of the timed calls) and prints us, GB/s\n"
     "of K/V bytes and GFLOP/s beside the ceilings measured in the same run (on the\n"
     "CPU also a paged read, and all three sampled again before every timed call);\n"
     "sampled output rows are checked against a double-precision recomputation.\n"
     "  --backend B         auto (default: the best found), cpu, cuda, hip\n"
     "  --device N          device index, 0 to 1023 (default 0)\n"
     "  --workload W        default, decode, prefill, mixed, ibm, e2e-llama8b (GPU only),\n"
     "                      e2e-llama8b-step (CUDA only: e2e-llama8b with a kernel writing each\n"
     "                      layer's Q and newest K/V before its call; attention = step total less\n"
     "                      those kernels alone), cp-prefill, cp-decode (context parallelism: under\n"
     "                      mpirun, or one process per GPU with RANK, WORLD_SIZE, LOCAL_RANK,\n"
     "                      ANYATTN_NCCL_ID_FILE set)\n"
     "  --cases LIST        instead of a workload: BxC (B sequences decoding at context C)\n"
     "                      and pBxL (B causal prompts of L tokens), comma separated\n"
     "  --filter TEXT       only the cases whose name contains TEXT (or one of the texts\n"
     "                      of A|B|...)\n"
     "  --list              print the cases (one JSON line each, with every sequence's\n"
     "                      query and key counts) and time nothing\n"
     "  --dtype T           bf16 (default), f16, f32\n"
     "  --kv-dtype T        the K/V caches' storage: as-q (default: --dtype), fp8 (OCP e4m3fn,\n"
     "                      also fp8_e4m3) or fp8_e4m3fnuz (AMD MI300), with per-tensor\n"
     "                      descales; needs --dtype bf16 or f16; K/V GB/s count 1 byte per\n"
     "                      element; not for the cp-* workloads\n"
     "  --prior-writes P    every call's batch->prior_writes: any (default) or new-keys (the\n"
     "                      work before a call writes only Q and the newest keys: the kernel\n"
     "                      reads metadata and older K/V before its dependency wait)\n"
     "  --hints H           the batch's host hints: all (default: max_q_len, max_kv_len and\n"
     "                      sum_kv_len), max (the two bounds vLLM's calling convention\n"
     "                      gives) or none\n"
     "  --head-dim D        the shape's head dim, 1 to 512 (default 128; not cp-*)\n"
     "  --config NAME[-kS]  force a config of the backend ('anyattn info' lists them; the\n"
     "                      CPU's one config is \"cpu\"), or a role pair PREFILL+DECODE (mixed\n"
     "                      batches in one launch); -kS forces S KV segments, 1 to 128\n"
     "  --iters N           timed calls per case, 1 to 100000 (default: 30 GPU, 5 CPU)\n"
     "  --max-context N     plan once with limits.max_context N, 1 to 16777216\n"
     "  --stage-kv N        limits.stage_kv_tokens N, 0 (default) to 536870912: over fp8 caches\n"
     "                      the GPU stages the keys of prefill batches of up to N keys to\n"
     "                      16-bit in the workspace before the attention kernel\n"
     "  --graph             time CUDA/HIP graph replays (GPU only)\n"
     "  --no-flush          no L2 flush between timed calls\n"
     "  --json FILE         also write the results to FILE as JSON\n"
     "  --ranks-per-node N  cp-*: ranks of one node for the two-level schedule, 1 to 4096\n"
     "                      (default: the ranks sharing a host)\n"
     "exit codes: 0 every case ran, 1 a case failed, 2 bad command line,\n"
     "            77 the backend has no device (or is not compiled in)\n"},
    {"cp-model", "--rates --intra-gbs --inter-gbs --gpus-per-node",
     "usage: anyattn cp-model [options]\n"
     "Predicts context-parallel causal prefill (Llama-3-8B heads, bf16) on 2 to 128 GPUs\n"
     "and 128k to 1M tokens: time, efficiency and communication hidden for the ring and\n"
     "the two-level schedule, and their extra memory (docs/design/context-parallel.md).\n"
     "  --rates FILE.json   prefill rates from `anyattn bench --workload prefill --json`\n"
     "                      (default: bench/results/h200/prefill.json of the source tree)\n"
     "  --intra-gbs G       GB/s one way between GPUs of a node, 0.1 to 100000 (default 360)\n"
     "  --inter-gbs G       GB/s one way between nodes, per GPU, 0.1 to 100000 (default 45)\n"
     "  --gpus-per-node N   1 to 1024 (default 8)\n"
     "exit codes: 0 done, 1 the rates file cannot be read, 2 bad command line\n"},
    {"tune", "--backend --device --grid --out --name --iters --depth --dtype --cells --head-dim --kv-dtype",
     "usage: anyattn tune --out FILE.csv [options]\n"
     "Sweeps every config (and KV split count) over a grid of batches, checking and\n"
     "timing each, writes the raw CSV and fits a decision tree beside it (FILE.json\n"
     "for anyattn_tree_load, FILE.h for src/choose/trees/).\n"
     "  --out FILE.csv      the sweep to write (required)\n"
     "  --backend B         auto (default: the best found), cpu, cuda, hip\n"
     "  --device N          device index, 0 to 1023 (default 0)\n"
     "  --grid G            ibm (default), full, decode (the full grid's cells whose\n"
     "                      every sequence has q_len 1, numbered from 0), or\n"
     "                      full-decode (those cells under their full-grid numbers,\n"
     "                      to list after a full sweep of the same shape in fit --in)\n"
     "  --name ID           the tree's name: lower-case letters, digits and _ (default tuned)\n"
     "  --iters N           timed calls per (cell, config), 1 to 100000\n"
     "  --depth D           tree depth, 1 to 16 (default 4); at most 511 nodes, the\n"
     "                      splits that save the most time first\n"
     "  --dtype T           bf16 (default), f16, f32\n"
     "  --head-dim D        the shape's head dim, 1 to 512 (default 128)\n"
     "  --kv-dtype T        the caches' storage: as-q (default), fp8, fp8_e4m3fnuz\n"
     "  --cells FROM:TO     grid cells FROM to TO-1 only, 0 <= FROM < TO <= 1000000 (one\n"
     "                      sweep over several device calls: concatenate the CSVs, then fit)\n"
     "exit codes: 0 done, 1 a failure, 2 bad command line, 77 the backend has no device\n"},
    {"fit", "--in --name --depth --eval",
     "usage: anyattn fit --in FILE.csv [--name ID] [--depth D]\n"
     "       anyattn fit --in FILE.csv --eval\n"
     "Fits the decision tree of a sweep written by tune (FILE.json and FILE.h beside\n"
     "it), or with --eval scores the library's tree for the sweep's device on it.\n"
     "  --in FILE.csv       the sweep (required); A.csv,B.csv,... reads several as one\n"
     "                      (sweeps of other shapes or cells on one device; the tree\n"
     "                      goes beside the first as tree_ID.json and tree_ID.h)\n"
     "  --name ID           the tree's name: lower-case letters, digits and _ (default tuned)\n"
     "  --depth D           tree depth, 1 to 16 (default 4); at most 511 nodes, the\n"
     "                      splits that save the most time first\n"
     "  --eval              score the library's tree instead of fitting one\n"
     "exit codes: 0 done, 1 a failure (e.g. an unreadable sweep), 2 bad command line\n"},
    {"report", "",
     "usage: anyattn report [options]\n"
     "Runs python3 -m anyattn.report with this CLI, its library and (in a build tree)\n"
     "the package in the sources: the ceilings, anyattn and every importable peer on the\n"
     "standard workloads, checked against a float64 reference, written as report.md,\n"
     "report.html, plots and CSV/JSON; --tune adds the tuning campaign. 'anyattn report\n"
     "--help' lists its options.\n"
     "exit codes: 0 done, 1 a failure, 2 bad command line, 77 no device for the backend,\n"
     "            130 interrupted (the partial report is written)\n"},
    {"version", "",
     "usage: anyattn version (or anyattn --version)\n"
     "Prints the version of anyattn.\n"},
    {"help", "",
     "usage: anyattn help [COMMAND]\n"
     "Prints the list of commands, or COMMAND's options (also: anyattn COMMAND --help).\n"},
};
enum { NUM_COMMANDS = sizeof commands / sizeof commands[0] };

/* Options without a value; every other option takes one. */
static const char *const switch_flags = "--quick --graph --no-flush --eval --list";

static const cli_command *command_named(const char *name) {
  for (int i = 0; i < NUM_COMMANDS; i++)
    if (!strcmp(commands[i].name, name)) return &commands[i];
  return NULL;
}

static const char *current_command = NULL; /* names the help the one-line errors point to */

/* A user's argument as an error message shows it: control characters escaped
 * (the message stays one line), cut after 64 bytes. Four results stay valid
 * at once, enough for one message. */
static const char *shown(const char *s) {
  enum { SLOTS = 4, KEEP = 64 };
  static char ring[SLOTS][KEEP * 4 + 8];
  static int next = 0;
  char *out = ring[next];
  next = (next + 1) % SLOTS;
  size_t n = 0, k = 0;
  for (; s[k] && k < KEEP; k++) {
    const unsigned char c = (unsigned char)s[k];
    if (c < 32 || c == 127) n += (size_t)sprintf(out + n, "\\x%02x", c);
    else out[n++] = (char)c;
  }
  if (s[k]) n += (size_t)sprintf(out + n, "...");
  out[n] = '\0';
  return out;
}

/* One line on stderr, exit code 2: the contract for bad command-line input. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("anyattn: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (current_command) fprintf(stderr, " (see 'anyattn help %s')\n", current_command);
  else fputs(" (see 'anyattn help')\n", stderr);
  return CLI_USAGE;
}

/* 1 when `word` is one of the space-separated words of `list`. */
static int word_in(const char *list, const char *word) {
  const size_t n = strlen(word);
  if (n == 0) return 0;
  for (const char *p = list; *p;) {
    const size_t len = strcspn(p, " ");
    if (len == n && !strncmp(p, word, n)) return 1;
    p += len;
    while (*p == ' ') p++;
  }
  return 0;
}

/* A decimal integer in [lo, hi]: digits with an optional '-', nothing else
 * (no octal "010", no hex, no spaces). */
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  const char *d = s[0] == '-' ? s + 1 : s;
  if (!d[0] || strspn(d, "0123456789") != strlen(d)) return -1;
  errno = 0;
  const long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_int_opt(const char *s, int lo, int hi, int *out) {
  long long v;
  if (parse_int(s, lo, hi, &v)) return -1;
  *out = (int)v;
  return 0;
}

/* A seed: 1 to 2^64-1, decimal, or hex with 0x as `check` prints it. 0 is
 * refused: the suite reads it as "no seed given". */
static int parse_seed(const char *s, unsigned long long *out) {
  const int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char *d = hex ? s + 2 : s;
  if (!d[0] || strspn(d, hex ? "0123456789abcdefABCDEF" : "0123456789") != strlen(d)) return -1;
  errno = 0;
  const unsigned long long v = strtoull(d, NULL, hex ? 16 : 10);
  if (errno == ERANGE || v == 0) return -1;
  *out = v;
  return 0;
}

/* A bandwidth in GB/s: a plain decimal number (digits, one optional '.') in [0.1, 100000]. */
static int parse_gbs(const char *s, double *out) {
  if (!s[0] || strspn(s, "0123456789.") != strlen(s) || strchr(s, '.') != strrchr(s, '.') || !strcmp(s, ".")) return -1;
  const double v = strtod(s, NULL);
  if (!(v >= 0.1 && v <= 100000)) return -1;
  *out = v;
  return 0;
}

typedef struct {
  anyattn_backend backend;
  int device;
  int quick, graph, iters;
  const char *filter, *workload, *json, *config, *grid, *out, *in, *name, *cases;
  int depth, no_flush, max_context, stage_kv, eval, cell_from, cell_to, list, ranks_per_node, gpus_per_node;
  const char *rates;
  double intra_gbs, inter_gbs;
  unsigned long long seed;
  anyattn_dtype dtype;
  anyattn_kv_dtype kv_dtype;
  anyattn_prior_writes prior_writes; /* bench --prior-writes */
  int hints;                         /* bench --hints (BENCH_HINTS_*) */
  int head_dim; /* bench --head-dim (0: the default) */
} cli_options;

/* 1 when --help or -h stands where an option may (not as another option's value). */
static int wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    if (!strncmp(argv[i], "--", 2) && !word_in(switch_flags, argv[i]) && i + 1 < argc &&
        strncmp(argv[i + 1], "--", 2) != 0)
      i++; /* its value */
  }
  return 0;
}

static int parse_value(const char *a, const char *v, cli_options *o);

/* Parses the options of command `cmd`. Returns 0, or 2 after the one-line error. */
static int parse_options(int argc, char **argv, const cli_command *cmd, cli_options *o) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!word_in(cmd->flags, a)) {
      for (int c = 0; c < NUM_COMMANDS; c++)
        if (word_in(commands[c].flags, a)) return usage_error("'%s' takes no option '%s'", cmd->name, shown(a));
      if (strncmp(a, "--", 2) != 0) return usage_error("unexpected argument '%s' (options start with --)", shown(a));
      return usage_error("unknown option '%s'", shown(a));
    }
    if (!strcmp(a, "--quick")) o->quick = 1;
    else if (!strcmp(a, "--graph")) o->graph = 1;
    else if (!strcmp(a, "--no-flush")) o->no_flush = 1;
    else if (!strcmp(a, "--eval")) o->eval = 1;
    else if (!strcmp(a, "--list")) o->list = 1;
    else if (i + 1 >= argc) return usage_error("option '%s' needs a value", shown(a));
    else if (!strncmp(argv[i + 1], "--", 2)) /* "--out --iters 5": the value is missing */
      return usage_error("option '%s' needs a value, got option '%s'", shown(a), shown(argv[i + 1]));
    else if (parse_value(a, argv[++i], o)) return CLI_USAGE;
  }
  return 0;
}

/* One option that takes a value. Returns 0, or 2 after the one-line error. */
static int parse_value(const char *a, const char *v, cli_options *o) {
  if (!strcmp(a, "--backend")) {
    if (anyattn_backend_from_name(v, &o->backend) != ANYATTN_STATUS_OK)
      return usage_error("unknown backend '%s' (auto, cpu, cuda, hip)", shown(v));
  } else if (!strcmp(a, "--device")) {
    if (parse_int_opt(v, 0, 1023, &o->device)) return usage_error("bad --device '%s' (0 to 1023)", shown(v));
  } else if (!strcmp(a, "--iters")) {
    if (parse_int_opt(v, 1, 100000, &o->iters)) return usage_error("bad --iters '%s' (1 to 100000)", shown(v));
  } else if (!strcmp(a, "--seed")) {
    if (parse_seed(v, &o->seed))
      return usage_error("bad --seed '%s' (1 to 18446744073709551615, decimal or 0x hex)", shown(v));
  } else if (!strcmp(a, "--filter")) {
    o->filter = v;
  } else if (!strcmp(a, "--workload")) {
    if (!bench_workload_known(v)) return usage_error("unknown workload '%s' (%s)", shown(v), bench_workload_names());
    o->workload = v;
  } else if (!strcmp(a, "--grid")) {
    if (strcmp(v, "ibm") && strcmp(v, "full") && strcmp(v, "decode") && strcmp(v, "full-decode"))
      return usage_error("unknown --grid '%s' (ibm, full, decode, full-decode)", shown(v));
    o->grid = v;
  } else if (!strcmp(a, "--out")) {
    o->out = v;
  } else if (!strcmp(a, "--in")) {
    o->in = v;
  } else if (!strcmp(a, "--name")) {
    if (!v[0] || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(v))
      return usage_error("--name '%s' must be lower-case letters, digits and _", shown(v));
    o->name = v;
  } else if (!strcmp(a, "--cells")) {
    char from[24];
    const char *colon = strchr(v, ':');
    long long f = -1, t = -1;
    if (colon && (size_t)(colon - v) < sizeof from) {
      memcpy(from, v, (size_t)(colon - v));
      from[colon - v] = '\0';
      if (parse_int(from, 0, 999999, &f) || parse_int(colon + 1, 1, 1000000, &t)) f = t = -1;
    }
    if (f < 0 || t <= f)
      return usage_error("bad --cells '%s' (FROM:TO, 0 <= FROM < TO <= 1000000: the grid's cells FROM to TO-1)",
                         shown(v));
    o->cell_from = (int)f;
    o->cell_to = (int)t;
  } else if (!strcmp(a, "--depth")) {
    if (parse_int_opt(v, 1, 16, &o->depth)) return usage_error("bad --depth '%s' (1 to 16)", shown(v));
  } else if (!strcmp(a, "--json")) {
    o->json = v;
  } else if (!strcmp(a, "--config")) {
    o->config = v;
  } else if (!strcmp(a, "--cases")) {
    case_list l = {0};
    const int bad = bench_parse_cases(&l, v);
    bench_free_cases(&l);
    if (bad) return usage_error("bad --cases '%s' (BxC decode, pBxL prefill, comma separated)", shown(v));
    o->cases = v;
  } else if (!strcmp(a, "--max-context")) {
    if (parse_int_opt(v, 1, 1 << 24, &o->max_context))
      return usage_error("bad --max-context '%s' (1 to %d)", shown(v), 1 << 24);
  } else if (!strcmp(a, "--stage-kv")) {
    if (parse_int_opt(v, 0, 1 << 29, &o->stage_kv)) return usage_error("bad --stage-kv '%s' (0 to %d)", shown(v), 1 << 29);
  } else if (!strcmp(a, "--ranks-per-node")) {
    if (parse_int_opt(v, 1, 4096, &o->ranks_per_node)) return usage_error("bad --ranks-per-node '%s' (1 to 4096)", shown(v));
  } else if (!strcmp(a, "--gpus-per-node")) {
    if (parse_int_opt(v, 1, 1024, &o->gpus_per_node)) return usage_error("bad --gpus-per-node '%s' (1 to 1024)", shown(v));
  } else if (!strcmp(a, "--intra-gbs") || !strcmp(a, "--inter-gbs")) {
    double g;
    if (parse_gbs(v, &g)) return usage_error("bad %s '%s' (a decimal number, 0.1 to 100000)", a, shown(v));
    *(!strcmp(a, "--intra-gbs") ? &o->intra_gbs : &o->inter_gbs) = g;
  } else if (!strcmp(a, "--rates")) {
    o->rates = v;
  } else if (!strcmp(a, "--head-dim")) {
    if (parse_int_opt(v, 1, BENCH_MAX_D, &o->head_dim))
      return usage_error("bad --head-dim '%s' (1 to %d)", shown(v), BENCH_MAX_D);
  } else if (!strcmp(a, "--dtype")) {
    if (!strcmp(v, "bf16")) o->dtype = ANYATTN_DTYPE_BF16;
    else if (!strcmp(v, "f16")) o->dtype = ANYATTN_DTYPE_F16;
    else if (!strcmp(v, "f32")) o->dtype = ANYATTN_DTYPE_F32;
    else return usage_error("unknown --dtype '%s' (bf16, f16, f32)", shown(v));
  } else if (!strcmp(a, "--prior-writes")) {
    if (!strcmp(v, "any")) o->prior_writes = ANYATTN_PRIOR_WRITES_ANY;
    else if (!strcmp(v, "new-keys")) o->prior_writes = ANYATTN_PRIOR_WRITES_NEW_KEYS;
    else return usage_error("unknown --prior-writes '%s' (any, new-keys)", shown(v));
  } else if (!strcmp(a, "--hints")) {
    if (!strcmp(v, "all")) o->hints = BENCH_HINTS_ALL;
    else if (!strcmp(v, "max")) o->hints = BENCH_HINTS_MAX;
    else if (!strcmp(v, "none")) o->hints = BENCH_HINTS_NONE;
    else return usage_error("unknown --hints '%s' (all, max, none)", shown(v));
  } else if (!strcmp(a, "--kv-dtype")) {
    if (!strcmp(v, "as-q")) o->kv_dtype = ANYATTN_KV_AS_Q;
    else if (!strcmp(v, "fp8") || !strcmp(v, "fp8_e4m3")) o->kv_dtype = ANYATTN_KV_FP8_E4M3;
    else if (!strcmp(v, "fp8_e4m3fnuz")) o->kv_dtype = ANYATTN_KV_FP8_E4M3FNUZ;
    else return usage_error("unknown --kv-dtype '%s' (as-q, fp8, fp8_e4m3, fp8_e4m3fnuz)", shown(v));
  } else {
    return usage_error("unknown option '%s'", shown(a));
  }
  return 0;
}

/* The backend a command runs on, resolved (AUTO: the best found). Returns 0,
 * or after one line on stderr 77 (no device, or not compiled in) or 1. */
static int open_backend(const cli_options *o, anyattn_backend *b) {
  anyattn_context *ctx = NULL;
  const anyattn_status s = anyattn_context_create(o->backend, o->device, &ctx);
  if (s != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
    return s == ANYATTN_STATUS_NO_DEVICE || s == ANYATTN_STATUS_BACKEND_UNAVAILABLE ? CLI_NO_DEVICE : CLI_FAILED;
  }
  *b = anyattn_context_backend(ctx);
  anyattn_context_free(ctx);
  return 0;
}

/* Whether the first len characters of name are a row of backend b's table;
 * the rows' names, comma-separated, into known. */
static int config_row(anyattn_backend b, const char *name, size_t len, char *known, size_t known_size) {
  size_t used = 0;
  known[0] = '\0';
  for (int i = 0; i < anyattn_config_count(b); i++) {
    anyattn_config_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    if (anyattn_config_get(b, i, &ci) != ANYATTN_STATUS_OK) continue;
    if (strlen(ci.name) == len && !strncmp(ci.name, name, len)) return 1;
    if (used < known_size)
      used += (size_t)snprintf(known + used, known_size - used, "%s%s", used ? ", " : "", ci.name);
  }
  return 0;
}

/* --config must name a config of the backend that runs, or bench fails every
 * case: a row of the backend's table (anyattn_config_get), or a role pair
 * PREFILL+DECODE of two rows, optionally with "-kS", 1 <= S <= 128
 * (anyattn.h, problem->config; plan checks that the rows form a pair); the
 * CPU backend has no table and one config, "cpu". Returns 0, or 2 after the
 * one-line error. */
static int check_config(anyattn_backend b, const char *name) {
  if (b == ANYATTN_BACKEND_CPU) {
    if (!strcmp(name, "cpu")) return 0;
    return usage_error("--config '%s' is not a config of backend cpu (its one config is \"cpu\")", shown(name));
  }
  size_t len = strlen(name);
  const char *dash = strrchr(name, '-');
  if (dash && dash[1] == 'k') {
    long long s;
    if (parse_int(dash + 2, 1, 128, &s))
      return usage_error("--config '%s': the suffix -kS takes 1 <= S <= 128 KV segments", shown(name));
    len = (size_t)(dash - name);
  }
  char known[512];
  const char *plus = memchr(name, '+', len);
  const int ok = plus ? config_row(b, name, (size_t)(plus - name), known, sizeof known) &&
                            config_row(b, plus + 1, len - (size_t)(plus - name) - 1, known, sizeof known)
                      : config_row(b, name, len, known, sizeof known);
  if (ok) return 0;
  return usage_error("--config '%s' is not a config of backend %s (%s, or PREFILL+DECODE; optionally -kS)",
                     shown(name), anyattn_backend_name(b), known);
}

static int cmd_info(void) {
  printf("anyattn %s (header %d.%d.%d)\n", anyattn_version_string(), ANYATTN_VERSION_MAJOR,
         ANYATTN_VERSION_MINOR, ANYATTN_VERSION_PATCH);
  static const anyattn_backend all[] = {ANYATTN_BACKEND_CPU, ANYATTN_BACKEND_CUDA, ANYATTN_BACKEND_HIP};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    anyattn_backend b = all[i];
    if (!anyattn_backend_compiled(b)) {
#ifdef ANYATTN_CLI_HIP_LIBRARY
      /* HIP lives in its own library (cmake/hip.cmake), which this CLI does not link. */
      if (b == ANYATTN_BACKEND_HIP) {
        printf("backend %-5s built as libanyattn_hip (this CLI links libanyattn)\n", anyattn_backend_name(b));
        continue;
      }
#endif
      printf("backend %-5s not compiled in\n", anyattn_backend_name(b));
      continue;
    }
    int n = 0;
    if (anyattn_device_count(b, &n) != ANYATTN_STATUS_OK || n == 0) {
      printf("backend %-5s compiled; no device (%s)\n", anyattn_backend_name(b), anyattn_last_error());
    } else {
      printf("backend %-5s compiled; %d device%s\n", anyattn_backend_name(b), n, n == 1 ? "" : "s");
      for (int d = 0; d < n; d++) {
        char name[128], tree[320];
        anyattn_context *ctx = NULL;
        if (anyattn_device_name(b, d, name, sizeof name) == ANYATTN_STATUS_OK) printf("  device %d: %s\n", d, name);
        if (anyattn_context_create(b, d, &ctx) == ANYATTN_STATUS_OK &&
            anyattn_tree_describe(ctx, tree, sizeof tree) == ANYATTN_STATUS_OK)
          printf("    config selection: %s\n", tree);
        anyattn_context_free(ctx);
      }
    }
    int nc = anyattn_config_count(b);
    for (int c = 0; c < nc; c++) {
      anyattn_config_info ci;
      memset(&ci, 0, sizeof ci);
      ci.struct_size = sizeof ci;
      if (anyattn_config_get(b, c, &ci) == ANYATTN_STATUS_OK)
        printf("  config %-14s block_m %3d block_n %3d warps %d stages %d\n", ci.name, ci.block_m, ci.block_n,
               ci.warps, ci.stages);
    }
  }
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(ANYATTN_BACKEND_AUTO, 0, &ctx) == ANYATTN_STATUS_OK)
    printf("best backend: %s\n", anyattn_backend_name(anyattn_context_backend(ctx)));
  anyattn_context_free(ctx);
  return CLI_OK;
}

static int cmd_check(const cli_options *o) {
  anyattn_backend b = o->backend;
  if (b == ANYATTN_BACKEND_AUTO) {
    const int rc = open_backend(o, &b);
    if (rc) return rc;
  }
  tl_check_options co;
  memset(&co, 0, sizeof co);
  co.quick = o->quick;
  co.filter = o->filter;
  co.seed = o->seed;
  int np = 0, nf = 0, ns = 0;
  printf("anyattn %s check: backend %s, device %d, %s suite\n", anyattn_version_string(), anyattn_backend_name(b),
         o->device, o->quick ? "quick" : "full");
  int rc = tl_check_run(b, o->device, &co, stdout, &np, &nf, &ns); /* prints its own summary */
  if (rc == 0 && np == 0 && nf == 0) {
    /* Nothing ran (e.g. a filter that matched nothing): not a pass. */
    fprintf(stderr, "anyattn: no conformance case ran\n");
    return CLI_FAILED;
  }
  return rc < 0 ? CLI_FAILED : rc;
}

static int cmd_bench(const cli_options *o) {
  anyattn_backend b;
  const int rc = open_backend(o, &b);
  if (rc) return rc;
  if (o->config && check_config(b, o->config)) return CLI_USAGE;
  if (b == ANYATTN_BACKEND_CPU && o->graph) return usage_error("--graph needs a GPU backend (this one is cpu)");
  if (b == ANYATTN_BACKEND_CPU && (!strcmp(o->workload, "e2e-llama8b") || !strcmp(o->workload, "e2e-llama8b-step")))
    return usage_error("workload %s needs a GPU backend (409,600 calls)", o->workload);
  if (o->kv_dtype != ANYATTN_KV_AS_Q && o->dtype == ANYATTN_DTYPE_F32)
    return usage_error("--kv-dtype %s needs --dtype bf16 or f16 (fp8 caches widen to the 16-bit type)",
                       anyattn_kv_dtype_name(o->kv_dtype));
  if (o->kv_dtype != ANYATTN_KV_AS_Q && !strncmp(o->workload, "cp-", 3))
    return usage_error("--kv-dtype: the %s workload takes caches of --dtype only", o->workload);
  bench_options bo;
  memset(&bo, 0, sizeof bo);
  bo.backend = o->backend;
  bo.device = o->device;
  bo.workload = o->workload;
  bo.json_path = o->json;
  bo.config = o->config;
  bo.graph = o->graph;
  bo.iters = o->iters;
  bo.cases = o->cases;
  bo.filter = o->filter;
  bo.list = o->list;
  bo.no_flush = o->no_flush;
  bo.max_context = o->max_context;
  bo.stage_kv = o->stage_kv;
  bo.dtype = o->dtype;
  bo.kv_dtype = o->kv_dtype;
  bo.prior_writes = o->prior_writes;
  bo.hints = o->hints;
  bo.ranks_per_node = o->ranks_per_node;
  bo.head_dim = o->head_dim;
  /* context parallelism: across the processes of a job (cp_bench.c), at the default head dim */
  return strncmp(bo.workload, "cp-", 3) ? bench_main(&bo) : cp_bench_main(&bo);
}

static int cmd_tune(const cli_options *o) {
  if (!o->out) return usage_error("'tune' needs --out FILE.csv");
  if (o->kv_dtype != ANYATTN_KV_AS_Q && o->dtype == ANYATTN_DTYPE_F32)
    return usage_error("--kv-dtype %s needs --dtype bf16 or f16 (fp8 caches widen to the 16-bit type)",
                       anyattn_kv_dtype_name(o->kv_dtype));
  anyattn_backend b;
  const int rc = open_backend(o, &b);
  if (rc) return rc;
  tune_options to;
  memset(&to, 0, sizeof to);
  to.backend = o->backend;
  to.device = o->device;
  to.grid = o->grid ? o->grid : "ibm";
  to.out = o->out;
  to.name = o->name ? o->name : "tuned";
  to.iters = o->iters;
  to.depth = o->depth;
  to.dtype = o->dtype;
  to.cell_from = o->cell_from;
  to.cell_to = o->cell_to;
  to.head_dim = o->head_dim;
  to.kv_dtype = o->kv_dtype;
  return tune_main(&to);
}

static int cmd_fit(const cli_options *o) {
  if (!o->in) return usage_error("'fit' needs --in FILE.csv");
  if (o->eval && (o->name || o->depth)) return usage_error("'fit --eval' takes no --name or --depth");
  if (o->eval) return eval_main(o->in);
  return fit_main(o->in, o->depth, o->name ? o->name : "tuned", NULL);
}

/* `anyattn report ARGS`: python3 -m anyattn.report ARGS (the report parses its
 * own options), told this CLI ($ANYATTN_CLI), the libanyattn.so beside it or in
 * the install prefix's lib folder ($ANYATTN_LIBRARY), and in a build tree the
 * package in the sources (prepended to $PYTHONPATH). $PYTHON names another
 * interpreter. Returns only when python cannot be started. */
static int cmd_report(int argc, char **argv) {
  char exe[4096], path[4200];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    setenv("ANYATTN_CLI", exe, 1);
    char *slash = strrchr(exe, '/'); /* an absolute path: there is one */
    if (slash) *slash = '\0';
    static const char *const beside[] = {"%s/libanyattn.so", "%s/../lib/libanyattn.so", "%s/../lib64/libanyattn.so"};
    struct stat st;
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
      snprintf(path, sizeof path, beside[i], exe);
      if (stat(path, &st) == 0) {
        setenv("ANYATTN_LIBRARY", path, 1);
        break;
      }
    }
  }
#ifdef ANYATTN_CLI_PYTHON_DIR
  struct stat st;
  if (stat(ANYATTN_CLI_PYTHON_DIR "/anyattn/report/__main__.py", &st) == 0) {
    const char *old = getenv("PYTHONPATH");
    snprintf(path, sizeof path, "%s%s%s", ANYATTN_CLI_PYTHON_DIR, old && old[0] ? ":" : "", old ? old : "");
    setenv("PYTHONPATH", path, 1);
  }
#endif
  const char *python = getenv("PYTHON") && getenv("PYTHON")[0] ? getenv("PYTHON") : "python3";
  char **args = (char **)calloc((size_t)argc + 4, sizeof *args);
  if (!args) return CLI_FAILED;
  args[0] = (char *)python;
  args[1] = (char *)"-m";
  args[2] = (char *)"anyattn.report";
  for (int i = 0; i < argc; i++) args[3 + i] = argv[i];
  fflush(stdout);
  execvp(python, args);
  fprintf(stderr, "anyattn: cannot run '%s' for the report: %s\n", shown(python), strerror(errno));
  free(args);
  return CLI_FAILED;
}

/* `anyattn help [COMMAND]`, `anyattn --help`: to stdout, exit 0. */
static int cmd_help(int argc, char **argv) {
  if (argc == 0) {
    fputs(usage_text, stdout);
    return CLI_OK;
  }
  if (argc > 1) return usage_error("'help' takes one command, got '%s' after '%s'", shown(argv[1]), shown(argv[0]));
  const cli_command *c = command_named(argv[0]);
  if (!c) return usage_error("no command '%s' to help with", shown(argv[0]));
  fputs(c->help, stdout);
  return CLI_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_text, stderr);
    return CLI_USAGE;
  }
  const char *name = argv[1];
  if (!strcmp(name, "--help") || !strcmp(name, "-h")) name = "help";
  if (!strcmp(name, "--version")) name = "version";
  const cli_command *cmd = command_named(name);
  if (!cmd) return usage_error("unknown command '%s'", shown(argv[1]));
  if (!strcmp(cmd->name, "help")) return cmd_help(argc - 2, argv + 2);
  if (!strcmp(cmd->name, "report")) return cmd_report(argc - 2, argv + 2);
  current_command = cmd->name;
  if (wants_help(argc - 2, argv + 2)) {
    fputs(cmd->help, stdout);
    return CLI_OK;
  }
  cli_options o;
  memset(&o, 0, sizeof o);
  o.backend = ANYATTN_BACKEND_AUTO;
  o.workload = "default";
  o.dtype = ANYATTN_DTYPE_BF16;
  if (!cmd->flags[0] && argc > 2) return usage_error("'%s' takes no arguments, got '%s'", cmd->name, shown(argv[2]));
  const int rc = parse_options(argc - 2, argv + 2, cmd, &o);
  if (rc) return rc;
  if (!strcmp(cmd->name, "version")) {
    printf("anyattn %s\n", anyattn_version_string());
    return CLI_OK;
  }
  if (!strcmp(cmd->name, "info")) return cmd_info();
  if (!strcmp(cmd->name, "check")) return cmd_check(&o);
  if (!strcmp(cmd->name, "bench")) return cmd_bench(&o);
  if (!strcmp(cmd->name, "tune")) return cmd_tune(&o);
  if (!strcmp(cmd->name, "cp-model")) {
    cp_model_options mo = {o.rates, o.intra_gbs > 0 ? o.intra_gbs : 360, o.inter_gbs > 0 ? o.inter_gbs : 45,
                           o.gpus_per_node ? o.gpus_per_node : 8, 32, 8, 128};
    return cp_model_main(&mo);
  }
  return cmd_fit(&o);
}
