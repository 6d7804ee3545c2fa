/* anyattn.c: the command-line tool. `info` lists backends and devices,
 * `check` runs the conformance suite against the double-precision reference,
 * `bench` times the shared workloads. Bad command-line input: one line on
 * stderr and exit code 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#include "bench.h"
#include "conformance.h"
#include "tune.h"

static const char *usage_text =
    "usage: anyattn <command> [options]\n"
    "  info                                   version, backends, devices, kernel configs\n"
    "  check [--backend B] [--device N] [--quick] [--filter TEXT] [--seed N]\n"
    "                                         conformance suite vs the reference; exit 0 all pass,\n"
    "                                         1 on any FAIL, 77 when the backend has no device\n"
    "  bench [--backend B] [--device N] [--workload W] [--json FILE] [--graph]\n"
    "        [--config NAME[-kS]] [--iters N] [--dtype bf16|f16|f32]\n"
    "        [--cases BxC,pBxL,...] [--no-flush] [--max-context N]\n"
    "                                         workloads: default, decode, prefill, mixed, ibm, e2e-llama8b\n"
    "  tune [--backend B] [--device N] [--grid ibm|full] --out FILE.csv [--name ID]\n"
    "       [--iters N] [--depth D] [--dtype T] [--cells FROM:TO]\n"
    "                                         sweep every config over a grid, check and time each,\n"
    "                                         write the raw CSV and fit a decision tree beside it;\n"
    "                                         --cells: grid cells FROM to TO-1 only (one sweep over\n"
    "                                         several sessions: concatenate the CSVs, then fit)\n"
    "                                         (FILE.json for anyattn_tree_load, FILE.h for src/choose/trees/)\n"
    "  fit --in FILE.csv [--name ID] [--depth D]  fit the tree of an existing sweep\n"
    "  fit --in FILE.csv --eval                score the library's tree for the sweep's device on it\n"
    "  help                                   this text\n"
    "backends: auto (default: best found), cpu, cuda, hip\n";

/* One line, exit 2: the contract for bad command-line input. */
static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "anyattn: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see 'anyattn help')\n");
  return 2;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 0);
  if (!s[0] || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

typedef struct {
  anyattn_backend backend;
  int device;
  int quick, graph, iters;
  const char *filter, *workload, *json, *config, *grid, *out, *in, *name, *cases;
  int depth, no_flush, max_context, eval, cell_from, cell_to;
  unsigned long long seed;
  anyattn_dtype dtype;
} cli_options;

/* 1 when `flag` is one of the space-separated words of `allowed`. */
static int flag_allowed(const char *allowed, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = strstr(allowed, flag); p; p = strstr(p + 1, flag))
    if ((p == allowed || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  return 0;
}

/* Parses options shared by the commands; `allowed` lists the flags the
 * command takes. Returns 0, or 2 after printing the one-line error. */
static int parse_options(int argc, char **argv, const char *allowed, cli_options *o) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) != 0 || !flag_allowed(allowed, a)) return usage_error("unknown option '%s'", a);
    /* flags without a value */
    if (!strcmp(a, "--quick")) {
      o->quick = 1;
      continue;
    }
    if (!strcmp(a, "--graph")) {
      o->graph = 1;
      continue;
    }
    if (!strcmp(a, "--no-flush")) {
      o->no_flush = 1;
      continue;
    }
    if (!strcmp(a, "--eval")) {
      o->eval = 1;
      continue;
    }
    if (i + 1 >= argc) return usage_error("option '%s' needs a value", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--backend")) {
      if (anyattn_backend_from_name(v, &o->backend) != ANYATTN_STATUS_OK)
        return usage_error("unknown backend '%s' (auto, cpu, cuda, hip)", v);
    } else if (!strcmp(a, "--device")) {
      if (parse_int(v, 0, 1023, &o->device)) return usage_error("bad --device '%s'", v);
    } else if (!strcmp(a, "--iters")) {
      if (parse_int(v, 1, 100000, &o->iters)) return usage_error("bad --iters '%s'", v);
    } else if (!strcmp(a, "--seed")) {
      char *end = NULL;
      o->seed = strtoull(v, &end, 0);
      if (!v[0] || *end) return usage_error("bad --seed '%s'", v);
    } else if (!strcmp(a, "--filter")) {
      o->filter = v;
    } else if (!strcmp(a, "--workload")) {
      if (!bench_workload_known(v)) return usage_error("unknown workload '%s' (default, decode, prefill, mixed, ibm, e2e-llama8b)", v);
      o->workload = v;
    } else if (!strcmp(a, "--grid")) {
      if (strcmp(v, "ibm") && strcmp(v, "full")) return usage_error("unknown --grid '%s' (ibm, full)", v);
      o->grid = v;
    } else if (!strcmp(a, "--out")) {
      o->out = v;
    } else if (!strcmp(a, "--in")) {
      o->in = v;
    } else if (!strcmp(a, "--name")) {
      for (const char *p = v; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
          return usage_error("--name '%s' must be lower-case letters, digits and _", v);
      o->name = v;
    } else if (!strcmp(a, "--cells")) {
      char *end = NULL;
      const long from = strtol(v, &end, 10);
      const long to = end && *end == ':' ? strtol(end + 1, &end, 10) : -1;
      if (!v[0] || *end || from < 0 || to <= from || to > 1000000)
        return usage_error("bad --cells '%s' (FROM:TO, 0 <= FROM < TO: the grid's cells FROM to TO-1)", v);
      o->cell_from = (int)from;
      o->cell_to = (int)to;
    } else if (!strcmp(a, "--depth")) {
      if (parse_int(v, 1, 8, &o->depth)) return usage_error("bad --depth '%s' (1 to 8)", v);
    } else if (!strcmp(a, "--json")) {
      o->json = v;
    } else if (!strcmp(a, "--config")) {
      o->config = v;
    } else if (!strcmp(a, "--cases")) {
      case_list l = {0};
      const int bad = bench_parse_cases(&l, v);
      bench_free_cases(&l);
      if (bad) return usage_error("bad --cases '%s' (BxC decode, pBxL prefill, comma separated)", v);
      o->cases = v;
    } else if (!strcmp(a, "--max-context")) {
      if (parse_int(v, 1, 1 << 24, &o->max_context)) return usage_error("bad --max-context '%s'", v);
    } else if (!strcmp(a, "--dtype")) {
      if (!strcmp(v, "bf16")) o->dtype = ANYATTN_DTYPE_BF16;
      else if (!strcmp(v, "f16")) o->dtype = ANYATTN_DTYPE_F16;
      else if (!strcmp(v, "f32")) o->dtype = ANYATTN_DTYPE_F32;
      else return usage_error("unknown --dtype '%s' (bf16, f16, f32)", v);
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  return 0;
}

static int cmd_info(void) {
  printf("anyattn %s (header %d.%d.%d)\n", anyattn_version_string(), ANYATTN_VERSION_MAJOR,
         ANYATTN_VERSION_MINOR, ANYATTN_VERSION_PATCH);
  static const anyattn_backend all[] = {ANYATTN_BACKEND_CPU, ANYATTN_BACKEND_CUDA, ANYATTN_BACKEND_HIP};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    anyattn_backend b = all[i];
    if (!anyattn_backend_compiled(b)) {
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
  return 0;
}

static int cmd_check(const cli_options *o) {
  anyattn_backend b = o->backend;
  if (b == ANYATTN_BACKEND_AUTO) {
    anyattn_context *ctx = NULL;
    if (anyattn_context_create(ANYATTN_BACKEND_AUTO, o->device, &ctx) != ANYATTN_STATUS_OK) {
      fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
      return 1;
    }
    b = anyattn_context_backend(ctx);
    anyattn_context_free(ctx);
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
    return 1;
  }
  return rc < 0 ? 1 : rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_text, stdout);
    return 0;
  }
  const char *cmd = argv[1];
  cli_options o;
  memset(&o, 0, sizeof o);
  o.backend = ANYATTN_BACKEND_AUTO;
  o.workload = "default";
  o.dtype = ANYATTN_DTYPE_BF16;
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    if (argc > 2) return usage_error("'help' takes no arguments, got '%s'", argv[2]);
    fputs(usage_text, stdout);
    return 0;
  }
  if (!strcmp(cmd, "info")) {
    if (argc > 2) return usage_error("'info' takes no arguments, got '%s'", argv[2]);
    return cmd_info();
  }
  if (!strcmp(cmd, "check")) {
    int rc = parse_options(argc - 2, argv + 2, "--backend --device --quick --filter --seed", &o);
    return rc ? rc : cmd_check(&o);
  }
  if (!strcmp(cmd, "bench")) {
    int rc = parse_options(argc - 2, argv + 2,
                           "--backend --device --workload --json --graph --config --iters --dtype --cases --no-flush "
                           "--max-context", &o);
    if (rc) return rc;
    bench_options bo;
    memset(&bo, 0, sizeof bo);
    bo.backend = o.backend;
    bo.device = o.device;
    bo.workload = o.workload;
    bo.json_path = o.json;
    bo.config = o.config;
    bo.graph = o.graph;
    bo.iters = o.iters;
    bo.cases = o.cases;
    bo.no_flush = o.no_flush;
    bo.max_context = o.max_context;
    bo.dtype = o.dtype;
    return bench_main(&bo);
  }
  if (!strcmp(cmd, "tune")) {
    int rc = parse_options(argc - 2, argv + 2,
                           "--backend --device --grid --out --name --iters --depth --dtype --cells", &o);
    if (rc) return rc;
    if (!o.out) return usage_error("'tune' needs --out FILE.csv%s", "");
    tune_options to;
    memset(&to, 0, sizeof to);
    to.backend = o.backend;
    to.device = o.device;
    to.grid = o.grid ? o.grid : "ibm";
    to.out = o.out;
    to.name = o.name ? o.name : "tuned";
    to.iters = o.iters;
    to.depth = o.depth;
    to.dtype = o.dtype;
    to.cell_from = o.cell_from;
    to.cell_to = o.cell_to;
    return tune_main(&to);
  }
  if (!strcmp(cmd, "fit")) {
    int rc = parse_options(argc - 2, argv + 2, "--in --name --depth --eval", &o);
    if (rc) return rc;
    if (!o.in) return usage_error("'fit' needs --in FILE.csv%s", "");
    if (o.eval) return eval_main(o.in);
    return fit_main(o.in, o.depth, o.name ? o.name : "tuned", NULL);
  }
  return usage_error("unknown command '%s'", cmd);
}
