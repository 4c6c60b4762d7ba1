/* xptrace report over any bytes read as a trace (report_load.c through
 * pt_read.c, the model, the tables, the tree, a diff with itself, every
 * format): never a crash, never a read out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report_export.h"
#include "report_load.h"
#include "report_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *out;
  if (!out)
    out = fopen("/dev/null", "we");
  if (!out)
    return 0;
  struct rp_options o = {.top = (size_t)(size & 7), .sel = {.pid = -1, .tid = -1}};
  o.depth = size & 3;
  o.sort = (size & 8) ? "p99" : NULL;
  struct rp_model a;
  rp_model_init(&a);
  rp_load_mem(&a, data, size);
  rp_model_finish(&a, &o.sel);
  struct rp_table t[RP_TABLES_MAX];
  for (int f = RP_FMT_TEXT; f <= RP_FMT_JSON; f++) {
    o.format = (enum rp_format)f;
    size_t n = rp_tables_build(&a, &o.sel, t);
    for (size_t i = 0; i < n; i++)
      rp_table_sort(&t[i], &o);
    rp_print(out, t, n, &o, "fuzz", NULL);
    for (size_t i = 0; i < n; i++)
      rp_table_free(&t[i]);
    rp_tree_build(&a, &o.sel, o.depth, &t[0]);
    rp_print(out, t, 1, &o, "fuzz", NULL);
    rp_table_free(&t[0]);
    n = rp_tables_diff(&a, &a, &o.sel, t);
    for (size_t i = 0; i < n; i++)
      rp_table_sort(&t[i], &o);
    rp_print(out, t, n, &o, "fuzz", "fuzz");
    for (size_t i = 0; i < n; i++)
      rp_table_free(&t[i]);
    rp_calltree_build(&a, &o.sel, o.depth, &t[0]);
    rp_print(out, t, 1, &o, "fuzz", NULL);
    rp_table_free(&t[0]);
    /* the function named by the first call path, if any */
    const char *fn = a.ncnodes > 1 ? rp_str_get(&a.s, a.cnodes[1].name) : "main";
    n = rp_graph_build(&a, &o.sel, fn, o.depth, t);
    for (size_t i = 0; i < n; i++)
      rp_table_sort(&t[i], &o);
    rp_print(out, t, n, &o, "fuzz", NULL);
    for (size_t i = 0; i < n; i++)
      rp_table_free(&t[i]);
  }
  rp_svg_write(&a, &o.sel, "fuzz", out);
  rp_model_free(&a);
  return 0;
}
