/* Flame graphs as self-contained SVG (flamegraph.h).  The root ("all")
 * is at the bottom; children sit above their parent, left to right by
 * name, each as wide as its share of the total. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flamegraph.h"
#include "xpt_files.h"

#define WIDTH 1200.0
#define PAD 10.0
#define ROW 16
#define TOP 36    /* title and buttons */
#define BOTTOM 24 /* details line */
#define MIN_PX 0.05 /* narrower frames are left out (invisible anyway) */

struct fnode {
  char *name;
  uint32_t parent, child, next; /* indices; 0 = none (0 is the root) */
  uint64_t value;
};

struct flamegraph {
  char *title, *unit;
  struct fnode *n;
  size_t len, cap;
  uint32_t *slot; /* (parent, name) -> node, open addressing */
  size_t slot_cap;
  size_t depth; /* deepest stack */
  bool oom;
};

static uint64_t key_hash(uint32_t parent, const char *name) {
  uint64_t h = 1469598103934665603ull ^ parent;
  for (; *name; name++)
    h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h ^ (h >> 31);
}

static bool rehash(struct flamegraph *g) {
  size_t cap = g->slot_cap ? g->slot_cap * 2 : 1024;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (!slot)
    return false;
  for (size_t i = 1; i < g->len; i++) {
    size_t k = key_hash(g->n[i].parent, g->n[i].name) & (cap - 1);
    while (slot[k])
      k = (k + 1) & (cap - 1);
    slot[k] = (uint32_t)i;
  }
  free(g->slot);
  g->slot = slot;
  g->slot_cap = cap;
  return true;
}

static uint32_t child(struct flamegraph *g, uint32_t parent, const char *name) {
  if ((g->len + 1) * 2 > g->slot_cap && !rehash(g))
    return 0;
  size_t k = key_hash(parent, name) & (g->slot_cap - 1);
  for (; g->slot[k]; k = (k + 1) & (g->slot_cap - 1)) {
    const struct fnode *c = &g->n[g->slot[k]];
    if (c->parent == parent && strcmp(c->name, name) == 0)
      return g->slot[k];
  }
  if (g->len == g->cap) {
    size_t nc = g->cap * 2;
    struct fnode *nn = realloc(g->n, nc * sizeof *nn);
    if (!nn)
      return 0;
    g->n = nn;
    g->cap = nc;
  }
  char *copy = strdup(name);
  if (!copy)
    return 0;
  uint32_t i = (uint32_t)g->len++;
  g->n[i] = (struct fnode){.name = copy, .parent = parent, .next = g->n[parent].child};
  g->n[parent].child = i;
  g->slot[k] = i;
  return i;
}

struct flamegraph *fg_new(const char *title, const char *unit) {
  struct flamegraph *g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  g->title = strdup(title);
  g->unit = strdup(unit);
  g->cap = 256;
  g->n = calloc(g->cap, sizeof *g->n);
  if (!g->title || !g->unit || !g->n) {
    fg_free(g);
    return NULL;
  }
  g->n[0].name = NULL;
  g->len = 1;
  return g;
}

void fg_free(struct flamegraph *g) {
  if (!g)
    return;
  for (size_t i = 1; i < g->len; i++)
    free(g->n[i].name);
  free(g->n);
  free(g->slot);
  free(g->title);
  free(g->unit);
  free(g);
}

void fg_add(struct flamegraph *g, const char *const *frames, size_t n, uint64_t value) {
  uint32_t at = 0;
  g->n[0].value += value;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = child(g, at, frames[i][0] ? frames[i] : "?");
    if (!c) {
      g->oom = true;
      return;
    }
    g->n[c].value += value;
    at = c;
  }
  if (n > g->depth)
    g->depth = n;
}

uint64_t fg_total(const struct flamegraph *g) { return g->n[0].value; }

bool fg_add_folded(struct flamegraph *g, FILE *in) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  const char **frames = NULL;
  size_t fcap = 0;
  while ((len = getline(&line, &cap, in)) > 0) {
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = 0;
    char *sp = strrchr(line, ' ');
    if (!sp)
      continue;
    *sp = 0;
    char *end;
    unsigned long long v = strtoull(sp + 1, &end, 10);
    if (*end || end == sp + 1)
      continue;
    size_t n = 0;
    for (char *p = line, *semi; p; p = semi ? semi + 1 : NULL) {
      semi = strchr(p, ';');
      if (semi)
        *semi = 0;
      if (n == fcap) {
        size_t nc = fcap ? fcap * 2 : 64;
        const char **nf = realloc(frames, nc * sizeof *nf);
        if (!nf) {
          g->oom = true;
          break;
        }
        frames = nf;
        fcap = nc;
      }
      frames[n++] = p;
    }
    fg_add(g, frames, n, v);
  }
  bool ok = !ferror(in);
  free(line);
  free(frames);
  return ok;
}

static void xml_text(FILE *out, const char *s, size_t max) {
  for (size_t i = 0; s[i] && i < max; i++) {
    switch (s[i]) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    default:
      if ((unsigned char)s[i] >= 0x20 || s[i] == '\t')
        fputc(s[i], out);
    }
  }
}

/* Warm colours, the same for a name in every graph. */
static void colour(const char *name, int rgb[3]) {
  uint32_t h = 2166136261u;
  for (const char *p = name; *p; p++)
    h = (h ^ (unsigned char)*p) * 16777619u;
  rgb[0] = 205 + (int)(h % 50);
  rgb[1] = 80 + (int)((h >> 8) % 150);
  rgb[2] = (int)((h >> 16) % 55);
}

static int by_name(const void *a, const void *b, void *ctx) {
  const struct fnode *n = ctx;
  return strcmp(n[*(const uint32_t *)a].name, n[*(const uint32_t *)b].name);
}

/* The script: zoom (click a frame; "Reset zoom"), search (a regular
 * expression: matching frames turn purple, their share is shown), the
 * frame under the pointer on the last line.  ?s=REGEX searches and
 * ?z=NAME zooms on the first frame so named when the file opens. */
static const char script[] =
    "var fr=[],W=0,P=0,tot=0;\n"
    "function $(id){return document.getElementById(id);}\n"
    "function init(){\n"
    " var gs=document.getElementsByClassName('fr');\n"
    " for(var i=0;i<gs.length;i++){var g=gs[i],r=g.getElementsByTagName('rect')[0];\n"
    "  var f={g:g,r:r,t:g.getElementsByTagName('text')[0],n:g.getAttribute('data-n'),\n"
    "   d:+g.getAttribute('data-d'),x:+r.getAttribute('x'),w:+r.getAttribute('width'),\n"
    "   fill:r.getAttribute('fill'),info:g.getElementsByTagName('title')[0].textContent};\n"
    "  fr.push(f);g.onclick=(function(f){return function(){zoom(f);};})(f);\n"
    "  g.onmouseover=(function(f){return function(){$('details').textContent=f.info;};})(f);\n"
    "  g.onmouseout=function(){$('details').textContent=' ';};}\n"
    " var s=document.documentElement;W=+s.getAttribute('data-w');P=+s.getAttribute('data-pad');\n"
    " $('reset').onclick=function(){zoom(null);};\n"
    " $('search').onclick=function(){var q=prompt('Search (regular expression)','');\n"
    "  if(q!==null)search(q);};\n"
    " var q=new URLSearchParams(location.search);\n"
    " if(q.get('z')){for(var i=0;i<fr.length;i++)if(fr[i].n==q.get('z')){zoom(fr[i]);break;}}\n"
    " if(q.get('s'))search(q.get('s'));\n"
    "}\n"
    "function label(f,w){var c=Math.floor((w-6)/7);\n"
    " f.t.textContent=c<3?'':(f.n.length<=c?f.n:f.n.substring(0,c-2)+'..');}\n"
    "function place(f,x,w){f.r.setAttribute('x',x);f.r.setAttribute('width',w);\n"
    " f.t.setAttribute('x',x+3);label(f,w);f.g.style.display='';f.g.style.opacity='';}\n"
    "function zoom(z){\n"
    " $('reset').style.display=z?'':'none';\n"
    " for(var i=0;i<fr.length;i++){var f=fr[i];\n"
    "  if(!z){place(f,f.x,f.w);continue;}\n"
    "  var inside=f.x>=z.x-1e-6&&f.x+f.w<=z.x+z.w+1e-6;\n"
    "  if(f.d<z.d&&f.x<=z.x+1e-6&&f.x+f.w>=z.x+z.w-1e-6){place(f,P,W);f.g.style.opacity='0.5';}\n"
    "  else if(f.d>=z.d&&inside)place(f,P+(f.x-z.x)/z.w*W,f.w/z.w*W);\n"
    "  else f.g.style.display='none';}\n"
    "}\n"
    "function search(q){var re;try{re=new RegExp(q);}catch(e){return;}\n"
    " var iv=[];\n"
    " for(var i=0;i<fr.length;i++){var f=fr[i],m=q!==''&&re.test(f.n);\n"
    "  f.r.setAttribute('fill',m?'rgb(200,60,230)':f.fill);if(m)iv.push([f.x,f.x+f.w]);}\n"
    " iv.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;\n"
    " for(var i=0;i<iv.length;i++){var a=Math.max(iv[i][0],end);\n"
    "  if(iv[i][1]>a)sum+=iv[i][1]-a;end=Math.max(end,iv[i][1]);}\n"
    " $('matched').textContent=iv.length?'Matched: '+(100*sum/W).toFixed(2)+'%':' ';\n"
    "}\n"
    "window.addEventListener('load',init);\n";

struct emit {
  struct flamegraph *g;
  FILE *out;
  double scale; /* px per unit */
  int height;
};

static void emit(struct emit *e, uint32_t i, size_t depth, double x) {
  const struct fnode *n = &e->g->n[i];
  double w = (double)n->value * e->scale;
  if (w < MIN_PX)
    return;
  const char *name = i ? n->name : "all";
  double y = e->height - BOTTOM - (double)(depth + 1) * ROW;
  int rgb[3] = {220, 220, 220};
  if (i)
    colour(name, rgb);
  double pct = e->g->n[0].value ? 100.0 * (double)n->value / (double)e->g->n[0].value : 0;
  fputs("<g class=\"fr\" data-n=\"", e->out);
  xml_text(e->out, name, 4096);
  fprintf(e->out, "\" data-d=\"%zu\" data-v=\"%llu\"><title>", depth,
          (unsigned long long)n->value);
  xml_text(e->out, name, 4096);
  fprintf(e->out, " (%llu %s, %.2f%%)</title><rect x=\"%.4f\" y=\"%.1f\" width=\"%.4f\" "
                  "height=\"%d\" rx=\"2\" fill=\"rgb(%d,%d,%d)\"/><text x=\"%.2f\" y=\"%.1f\">",
          (unsigned long long)n->value, e->g->unit, pct, x, y, w, ROW - 1, rgb[0], rgb[1],
          rgb[2], x + 3, y + 11.5);
  size_t fit = w > 6 ? (size_t)((w - 6) / 7) : 0;
  if (fit >= 3) {
    size_t len = strlen(name);
    xml_text(e->out, name, len <= fit ? len : fit - 2);
    if (len > fit)
      fputs("..", e->out);
  }
  fputs("</text></g>\n", e->out);
  /* children by name, left to right */
  size_t nc = 0;
  for (uint32_t c = n->child; c; c = e->g->n[c].next)
    nc++;
  if (!nc)
    return;
  uint32_t *kids = malloc(nc * sizeof *kids);
  if (!kids) {
    e->g->oom = true;
    return;
  }
  nc = 0;
  for (uint32_t c = n->child; c; c = e->g->n[c].next)
    kids[nc++] = c;
  qsort_r(kids, nc, sizeof *kids, by_name, e->g->n);
  for (size_t k = 0; k < nc; k++) {
    emit(e, kids[k], depth + 1, x);
    x += (double)e->g->n[kids[k]].value * e->scale;
  }
  free(kids);
}

bool fg_write(struct flamegraph *g, FILE *out) {
  int height = TOP + (int)(g->depth + 1) * ROW + BOTTOM;
  fprintf(out,
          "<?xml version=\"1.0\" standalone=\"no\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" data-w=\"%.0f\" data-pad=\"%.0f\" data-total=\"%llu\">\n"
          "<style>text{font-family:monospace;font-size:12px;fill:#000}"
          ".fr{cursor:pointer}.fr:hover rect{stroke:#000;stroke-width:0.5}"
          ".button{fill:#226;cursor:pointer}#title{font-size:16px}</style>\n"
          "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#f6f6ee\"/>\n"
          "<text id=\"title\" x=\"%.0f\" y=\"22\" text-anchor=\"middle\">",
          (int)(WIDTH + 2 * PAD), height, (int)(WIDTH + 2 * PAD), height, WIDTH, PAD,
          (unsigned long long)g->n[0].value, script, (WIDTH + 2 * PAD) / 2);
  xml_text(out, g->title, 4096);
  fprintf(out,
          "</text>\n"
          "<text id=\"reset\" class=\"button\" x=\"%.0f\" y=\"22\" style=\"display:none\">"
          "Reset zoom</text>\n"
          "<text id=\"search\" class=\"button\" x=\"%.0f\" y=\"22\" text-anchor=\"end\">"
          "Search</text>\n"
          "<text id=\"details\" x=\"%.0f\" y=\"%d\"> </text>\n"
          "<text id=\"matched\" x=\"%.0f\" y=\"%d\" text-anchor=\"end\"> </text>\n"
          "<g id=\"frames\">\n",
          PAD, WIDTH + PAD, PAD, height - 8, WIDTH + PAD, height - 8);
  if (g->n[0].value) {
    struct emit e = {g, out, WIDTH / (double)g->n[0].value, height};
    emit(&e, 0, 0, PAD);
  }
  fputs("</g>\n</svg>\n", out);
  return !g->oom && !ferror(out);
}

int fg_folded_to_svg(const char *dir, const char *folded_name, const char *svg_name,
                     const char *title, const char *unit) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, folded_name) >= sizeof path)
    return ENAMETOOLONG;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!in) {
    int err = errno;
    if (fd >= 0)
      close(fd);
    return err;
  }
  struct flamegraph *g = fg_new(title, unit);
  int err = g ? 0 : ENOMEM;
  if (g && !fg_add_folded(g, in))
    err = errno ? errno : EIO;
  fclose(in);
  FILE *out = err ? NULL : xpt_create_stream(dir, svg_name, path, sizeof path);
  if (!err && !out)
    err = errno ? errno : EIO;
  if (out) {
    if (!fg_write(g, out))
      err = errno ? errno : EIO;
    if (fclose(out) != 0 && !err)
      err = errno;
  }
  fg_free(g);
  return err;
}
