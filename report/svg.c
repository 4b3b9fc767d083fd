/* The svg report: the flame tree of a report (flame_tree.c) drawn as an
 * interactive flame graph of outstanding bytes, one self-contained file (inline
 * CSS and script, generic fonts) that any browser opens without a network. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flame_tree.h"
#include "report_internal.h"
#include "svg.h"

/* ---- Layout ---- */

/*
 * In SVG user units (px at 100%).  The flame grows upwards: the root ("all")
 * is the bottom row and each frame's callees sit on top of it.  Text uses the
 * generic monospace family, whose advance is 0.6 em in the fonts Linux
 * systems ship (DejaVu Sans Mono, Liberation Mono), so this writer and the
 * script fit a label into a box by counting characters, with one rule.
 */
#define FG_IMAGE_W 1200.0
#define FG_PAD 10.0                       /* left and right margin */
#define FG_GRAPH_W (FG_IMAGE_W - 2 * FG_PAD)
#define FG_ROW_H 16.0                     /* one frame row; boxes are 1 px lower */
#define FG_FONT_PX 12.0
#define FG_TITLE_PX 17.0
#define FG_CHAR_W (0.6 * FG_FONT_PX)      /* monospace advance */
#define FG_TITLE_CHARS 90                 /* keeps the title clear of the buttons */
#define FG_SUBTITLE_CHARS 160             /* FG_GRAPH_W / FG_CHAR_W */
#define FG_LABEL_PAD 3.0                  /* label inset on each side of its box */
#define FG_MIN_LABEL_CHARS 3              /* fewer fit: the box has no label */
#define FG_MIN_BOX_W 0.1                  /* narrower boxes fold into their parent */
#define FG_HEAD_H 80.0                    /* title, subtitle and legend above the graph */
#define FG_LEAK_LEGEND_H 16.0             /* the leak kinds' legend row, when drawn */
#define FG_FOOT_H 30.0                    /* the details line below it */
#define FG_EMPTY_H 120.0                  /* height of the "nothing outstanding" image */
#define FG_MATCH_FILL "rgb(230,0,230)"    /* search hits; in no palette below */

#define ELLIPSIS "\xe2\x80\xa6"

/* ---- Colours (the kinds are in flame_tree.h) ---- */

/* Channel c of a kind's colour is base[c] + span[c] * v, v in [0, 1). */
static const struct fg_palette {
	const char *name;   /* data-k attribute, for scripts and tests */
	const char *legend;
	unsigned char base[3], span[3];
} fg_palettes[FLAME_NKINDS] = {
	[FLAME_USER] = { "user", "your code (executable and its own libraries)",
			 { 205, 70, 20 }, { 50, 90, 40 } },
	[FLAME_SYSTEM] = { "system", "system libraries (/lib, /usr/lib)",
			   { 70, 140, 205 }, { 50, 60, 50 } },
	[FLAME_ALLOC] = { "alloc", "allocator", { 70, 175, 70 }, { 60, 55, 50 } },
	[FLAME_OTHER] = { "other", "unknown / added by dwleak",
			  { 165, 165, 165 }, { 35, 35, 35 } },
	/* the leak check's kind boxes: red for lost, amber for possibly, teal
	 * for reachable, so the split reads at a glance */
#define LEAK_PALETTE(id, name, phrase) [FLAME_##id] = { #name, phrase, LEAK_COLOURS_##id },
#define LEAK_COLOURS_DEFINITELY_LOST { 200, 20, 20 }, { 40, 40, 40 }
#define LEAK_COLOURS_INDIRECTLY_LOST { 215, 95, 30 }, { 30, 40, 30 }
#define LEAK_COLOURS_POSSIBLY_LOST { 220, 170, 30 }, { 30, 40, 30 }
#define LEAK_COLOURS_REACHABLE { 80, 160, 150 }, { 40, 40, 40 }
	REPORT_LEAK_KINDS(LEAK_PALETTE)
#undef LEAK_PALETTE
};

/* Writes the "rgb(r,g,b)" of kind K for NAME into BUF (24 bytes suffice). */
static void kind_colour(char *buf, size_t size, enum flame_kind k, const char *name)
{
	const struct fg_palette *p = &fg_palettes[k];
	uint64_t h = name ? flame_name_hash(name) : 0x8000800080008000ULL;
	double v[3];
	int c, rgb[3];

	for (c = 0; c < 3; c++)
		v[c] = (double)((h >> (16 * c)) & 0xffff) / 65536.0;
	if (k == FLAME_OTHER) /* greys: one value for all three channels */
		v[1] = v[2] = v[0];
	for (c = 0; c < 3; c++)
		rgb[c] = p->base[c] + (int)(p->span[c] * v[c]);
	snprintf(buf, size, "rgb(%d,%d,%d)", rgb[0], rgb[1], rgb[2]);
}

/* ---- XML text ---- */

/* Characters STR shows as: one per code point and one per broken byte. */
static size_t xml_chars(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = 0, len;
	uint32_t cp;

	while (*s) {
		len = report_utf8_decode(s, &cp);
		s += len ? len : 1;
		n++;
	}
	return n;
}

/*
 * Writes at most MAX characters of STR as XML text, fit for element content
 * and quoted attributes alike: the five markup characters as entities, and
 * what XML 1.0 cannot carry or a label should not (control characters, broken
 * UTF-8, U+FFFE, U+FFFF) as U+FFFD.
 */
static void xml_put(FILE *f, const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;
	uint32_t cp;

	for (; *s && max; max--) {
		len = report_utf8_decode(s, &cp);
		if (!len || cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff) {
			fputs("\xef\xbf\xbd", f);
			s += len ? len : 1;
			continue;
		}
		switch (cp) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fwrite(s, 1, len, f); break;
		}
		s += len;
	}
}

/* STR in at most MAX characters, the last one an ellipsis when it is cut. */
static void xml_put_fit(FILE *f, const char *str, size_t max)
{
	if (xml_chars(str) <= max) {
		xml_put(f, str, max);
	} else if (max) {
		xml_put(f, str, max - 1);
		fputs(ELLIPSIS, f);
	}
}

/* Characters that fit in a label of a box WIDTH wide; the script's fit() uses
 * the same rule when zooming. */
static size_t label_chars(double width)
{
	double n = (width - 2 * FG_LABEL_PAD) / FG_CHAR_W;

	return n < FG_MIN_LABEL_CHARS ? 0 : (size_t)n;
}

/* ---- The document ---- */

/* Shared by the graph and the empty image; a printf format taking
 * FG_FONT_PX and FG_TITLE_PX. */
static const char svg_style[] =
	"text { font-family: monospace; font-size: %.0fpx; fill: rgb(0,0,0); }\n"
	"#title { font-size: %.0fpx; }\n"
	".f rect { cursor: pointer; }\n"
	".f text { pointer-events: none; }\n"
	".f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.6; }\n"
	".f.inl text { font-style: italic; }\n"
	".f.anc { opacity: 0.55; }\n"
	".f.hid, .button.off { display: none; }\n"
	".button { cursor: pointer; fill: rgb(40,40,160); }\n"
	".button:hover { text-decoration: underline; }\n";

/*
 * The interactive part.  Each box is a <g class="f"> carrying its frame in
 * data-* attributes: n name, m module, b bytes, a allocations, o offset (the
 * bytes left of it in its row), d depth (0 = root).  A box lies inside
 * another when it is deeper and its [o, o + b) is within the other's, so
 * zooming and the search's union of matches need no tree in the script.
 */
static const char svg_script[] =
	"\"use strict\";\n"
	"var fg;\n"
	"function fg_init() {\n"
	"\tvar root = document.getElementById(\"frames\");\n"
	"\tfg = {\n"
	"\t\ttotal: +root.getAttribute(\"data-total\"),\n"
	"\t\tpad: +root.getAttribute(\"data-pad\"),\n"
	"\t\twidth: +root.getAttribute(\"data-width\"),\n"
	"\t\tcharW: +root.getAttribute(\"data-char-w\"),\n"
	"\t\tlabelPad: +root.getAttribute(\"data-label-pad\"),\n"
	"\t\tminChars: +root.getAttribute(\"data-min-chars\"),\n"
	"\t\tframes: [], term: \"\",\n"
	"\t\tdetails: document.getElementById(\"details\"),\n"
	"\t\tmatched: document.getElementById(\"matched\"),\n"
	"\t\treset: document.getElementById(\"reset\"),\n"
	"\t\tclear: document.getElementById(\"clear\")\n"
	"\t};\n"
	"\tvar boxes = root.getElementsByTagName(\"g\");\n"
	"\tfor (var i = 0; i < boxes.length; i++) {\n"
	"\t\tvar el = boxes[i];\n"
	"\t\tvar fr = {\n"
	"\t\t\tel: el,\n"
	"\t\t\trect: el.getElementsByTagName(\"rect\")[0],\n"
	"\t\t\tlabel: el.getElementsByTagName(\"text\")[0],\n"
	"\t\t\tname: el.getAttribute(\"data-n\"),\n"
	"\t\t\tmodule: el.getAttribute(\"data-m\") || \"\",\n"
	"\t\t\tbytes: +el.getAttribute(\"data-b\"),\n"
	"\t\t\tallocs: +el.getAttribute(\"data-a\"),\n"
	"\t\t\toff: +el.getAttribute(\"data-o\"),\n"
	"\t\t\tdepth: +el.getAttribute(\"data-d\"),\n"
	"\t\t\tinlined: el.classList.contains(\"inl\")\n"
	"\t\t};\n"
	"\t\tfr.fill = fr.rect.getAttribute(\"fill\");\n"
	"\t\tel.addEventListener(\"mouseover\", show.bind(null, fr));\n"
	"\t\tel.addEventListener(\"mouseout\", function () { fg.details.textContent = \" \"; });\n"
	"\t\tel.addEventListener(\"click\", zoom.bind(null, fr));\n"
	"\t\tfg.frames.push(fr);\n"
	"\t}\n"
	"\tfg.reset.addEventListener(\"click\", unzoom);\n"
	"\tfg.clear.addEventListener(\"click\", function () { highlight(\"\"); });\n"
	"\tdocument.getElementById(\"search\").addEventListener(\"click\", search);\n"
	"\twindow.addEventListener(\"keydown\", function (e) {\n"
	"\t\tif ((e.ctrlKey || e.metaKey) && e.key == \"f\") {\n"
	"\t\t\te.preventDefault();\n"
	"\t\t\tsearch();\n"
	"\t\t} else if (e.key == \"Escape\") {\n"
	"\t\t\thighlight(\"\");\n"
	"\t\t}\n"
	"\t});\n"
	"}\n"
	"function human(b) {\n"
	"\tvar units = [\"B\", \"KiB\", \"MiB\", \"GiB\", \"TiB\", \"PiB\"], u = 0;\n"
	"\twhile (b >= 1024 && u + 1 < units.length) {\n"
	"\t\tb /= 1024;\n"
	"\t\tu++;\n"
	"\t}\n"
	"\treturn (u ? b.toFixed(1) : b) + \" \" + units[u];\n"
	"}\n"
	"function share(b) {\n"
	"\treturn (fg.total ? 100 * b / fg.total : 0).toFixed(2) + \"%\";\n"
	"}\n"
	"function show(fr) {\n"
	"\tvar t = fr.name + (fr.inlined ? \" (inlined)\" : \"\");\n"
	"\tif (fr.module)\n"
	"\t\tt += \" in \" + fr.module;\n"
	"\tt += \": \" + human(fr.bytes) + \" (\" + share(fr.bytes) + \"), \" + fr.allocs +\n"
	"\t\t(fr.allocs == 1 ? \" allocation\" : \" allocations\");\n"
	"\tfg.details.textContent = t;\n"
	"}\n"
	"function fit(name, w) {\n"
	"\tvar n = (w - 2 * fg.labelPad) / fg.charW;\n"
	"\tif (n < fg.minChars)\n"
	"\t\treturn \"\";\n"
	"\tn = Math.floor(n);\n"
	"\tvar chars = Array.from(name);\n"
	"\treturn chars.length <= n ? name : chars.slice(0, n - 1).join(\"\") + \"\\u2026\";\n"
	"}\n"
	"function place(fr, x, w) {\n"
	"\tfr.rect.setAttribute(\"x\", x.toFixed(2));\n"
	"\tfr.rect.setAttribute(\"width\", w.toFixed(2));\n"
	"\tfr.label.setAttribute(\"x\", (x + fg.labelPad).toFixed(2));\n"
	"\tfr.label.textContent = fit(fr.name, w);\n"
	"}\n"
	"function zoom(z) {\n"
	"\tif (z.depth == 0) {\n"
	"\t\tunzoom();\n"
	"\t\treturn;\n"
	"\t}\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tvar cls = fr.el.classList;\n"
	"\t\tif (fr.depth >= z.depth && fr.off >= z.off && fr.off + fr.bytes <= z.off + z.bytes) {\n"
	"\t\t\tcls.remove(\"hid\", \"anc\");\n"
	"\t\t\tplace(fr, fg.pad + (fr.off - z.off) / z.bytes * fg.width, fr.bytes / z.bytes * fg.width);\n"
	"\t\t} else if (fr.depth < z.depth && fr.off <= z.off && fr.off + fr.bytes >= z.off + z.bytes) {\n"
	"\t\t\tcls.remove(\"hid\");\n"
	"\t\t\tcls.add(\"anc\");\n"
	"\t\t\tplace(fr, fg.pad, fg.width);\n"
	"\t\t} else {\n"
	"\t\t\tcls.add(\"hid\");\n"
	"\t\t}\n"
	"\t});\n"
	"\tfg.reset.classList.remove(\"off\");\n"
	"}\n"
	"function unzoom() {\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tfr.el.classList.remove(\"hid\", \"anc\");\n"
	"\t\tplace(fr, fg.pad + fr.off / fg.total * fg.width, fr.bytes / fg.total * fg.width);\n"
	"\t});\n"
	"\tfg.reset.classList.add(\"off\");\n"
	"}\n"
	"function search() {\n"
	"\tvar term = window.prompt(\"Search functions and modules (a regular expression; empty clears):\", fg.term);\n"
	"\tif (term !== null)\n"
	"\t\thighlight(term);\n"
	"}\n"
	"function highlight(term) {\n"
	"\tvar re = null, spans = [];\n"
	"\tfg.term = term;\n"
	"\tif (term) {\n"
	"\t\ttry {\n"
	"\t\t\tre = new RegExp(term);\n"
	"\t\t} catch (e) {\n"
	"\t\t\tre = { test: function (s) { return s.indexOf(term) >= 0; } };\n"
	"\t\t}\n"
	"\t}\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tvar hit = re !== null && fr.depth > 0 && (re.test(fr.name) || re.test(fr.module));\n"
	"\t\tfr.rect.setAttribute(\"fill\", hit ? \"" FG_MATCH_FILL "\" : fr.fill);\n"
	"\t\tif (hit)\n"
	"\t\t\tspans.push([fr.off, fr.off + fr.bytes]);\n"
	"\t});\n"
	"\tif (re === null) {\n"
	"\t\tfg.matched.textContent = \" \";\n"
	"\t\tfg.clear.classList.add(\"off\");\n"
	"\t\treturn;\n"
	"\t}\n"
	"\t/* A match inside another match counts once: sum the union of spans. */\n"
	"\tspans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
	"\tvar sum = 0, end = -1;\n"
	"\tspans.forEach(function (s) {\n"
	"\t\tif (s[1] > end) {\n"
	"\t\t\tsum += s[1] - Math.max(s[0], end);\n"
	"\t\t\tend = s[1];\n"
	"\t\t}\n"
	"\t});\n"
	"\tfg.matched.textContent = \"Matched: \" + share(sum) + \" (\" + human(sum) + \")\";\n"
	"\tfg.clear.classList.remove(\"off\");\n"
	"}\n"
	"fg_init();\n";

struct svg_out {
	FILE *f;
	const struct flame_tree *t;
	double scale;   /* px per byte */
	double root_y;  /* top of the root's row */
};

static bool box_visible(const struct svg_out *o, const struct flame_node *nd)
{
	return (double)nd->bytes * o->scale >= FG_MIN_BOX_W;
}

/* Rows above node I that have a visible box (0 for a leaf). */
static int visible_height(const struct svg_out *o, size_t i)
{
	int h = 0, ch;
	size_t c;

	for (c = o->t->nodes[i].child; c != FLAME_NO_NODE; c = o->t->nodes[c].sibling) {
		if (!box_visible(o, &o->t->nodes[c]))
			break; /* the rest are narrower still */
		ch = 1 + visible_height(o, c);
		if (ch > h)
			h = ch;
	}
	return h;
}

static void svg_open(FILE *f, double height, const struct report *r)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d", r->pid);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		   "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		   "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
		FG_IMAGE_W, height, FG_IMAGE_W, height);
	fprintf(f, "<title>dwleak: outstanding memory of pid %s (", pid);
	xml_put(f, r->command ? r->command : "unknown command", SIZE_MAX);
	fputs(")</title>\n<desc>A flame graph of the allocations still outstanding, by call stack, "
	      "written by dwleak: the outermost frame at the bottom, widths in bytes. "
	      "Hover for details, click to zoom, Ctrl-F to search.</desc>\n", f);
	fputs("<style type=\"text/css\"><![CDATA[\n", f);
	fprintf(f, svg_style, FG_FONT_PX, FG_TITLE_PX);
	fputs("]]></style>\n", f);
	fputs("<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
	      "<stop offset=\"5%\" stop-color=\"rgb(238,238,238)\"/>"
	      "<stop offset=\"95%\" stop-color=\"rgb(238,238,176)\"/>"
	      "</linearGradient></defs>\n", f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"url(#bg)\"/>\n",
		FG_IMAGE_W, height);
}

/* The title and subtitle lines, centred. */
static void svg_titles(FILE *f, const struct report *r)
{
	char bytes[24], missing[64] = "", *line;
	const char *cmd = r->command ? r->command : "unknown command";
	size_t untraced;
	int len;

	fprintf(f, "<text id=\"title\" x=\"%.1f\" y=\"24\" text-anchor=\"middle\">", FG_IMAGE_W / 2);
	len = asprintf(&line, "Outstanding memory of pid %d: %s", r->pid, cmd);
	xml_put_fit(f, len < 0 ? cmd : line, FG_TITLE_CHARS);
	if (len >= 0)
		free(line);
	fputs("</text>\n", f);

	report_human_bytes(bytes, sizeof(bytes), (double)r->totals.outstanding_bytes);
	fprintf(f, "<text id=\"subtitle\" x=\"%.1f\" y=\"44\" text-anchor=\"middle\">", FG_IMAGE_W / 2);
	untraced = report_untraced_count(r);
	if (untraced)
		snprintf(missing, sizeof(missing), "%zu process%s NOT TRACED, not in this graph; ", untraced,
			 untraced == 1 ? "" : "es");
	/* first, so that fitting the line to the width never cuts it off */
	len = asprintf(&line, "%s%s in %" PRIu64 " allocations from %" PRIu64 " stacks, traced %.1f s, "
			      "unwind %s; width = bytes still allocated, callers below callees",
		       missing, bytes, r->totals.outstanding_allocations, r->totals.stacks,
		       r->duration_s, r->unwind ? r->unwind : "dwarf");
	if (len >= 0) {
		xml_put_fit(f, line, FG_SUBTITLE_CHARS);
		free(line);
	}
	fputs("</text>\n", f);
}

/* One legend entry of kind K at X, on the row whose text baseline is Y;
 * returns the X of the next. */
static double legend_entry(FILE *f, int k, double x, double y)
{
	char colour[24];

	kind_colour(colour, sizeof(colour), (enum flame_kind)k, NULL);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
		   "<text x=\"%.1f\" y=\"%.0f\">%s</text>\n",
		x, y - 10, colour, x + 16, y, fg_palettes[k].legend);
	return x + 16 + FG_CHAR_W * (double)strlen(fg_palettes[k].legend) + 24;
}

/* Whether T has a leak check's kind box: the legend then has a row for them. */
static bool tree_has_leak_kinds(const struct flame_tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (FLAME_IS_LEAK(t->nodes[i].kind))
			return true;
	return false;
}

/* The buttons (top corners) and the colour legend (under the subtitle): the
 * frame kinds, then a row of leak kinds when LEAK_ROW. */
static void svg_controls(FILE *f, bool leak_row)
{
	double x = FG_PAD;
	int k;

	fprintf(f, "<text id=\"reset\" class=\"button off\" x=\"%.1f\" y=\"24\">Reset zoom</text>\n",
		FG_PAD);
	fprintf(f, "<text id=\"search\" class=\"button\" x=\"%.1f\" y=\"24\" text-anchor=\"end\">"
		   "Search</text>\n", FG_IMAGE_W - FG_PAD);
	fprintf(f, "<text id=\"clear\" class=\"button off\" x=\"%.1f\" y=\"44\" text-anchor=\"end\">"
		   "Clear search</text>\n", FG_IMAGE_W - FG_PAD);
	fputs("<g id=\"legend\">\n", f);
	for (k = 0; k < FLAME_FIRST_LEAK; k++)
		x = legend_entry(f, k, x, 66);
	fprintf(f, "<text x=\"%.1f\" y=\"66\" font-style=\"italic\">italic = inlined</text>\n", x);
	for (k = FLAME_FIRST_LEAK, x = FG_PAD; leak_row && k < FLAME_NKINDS; k++)
		x = legend_entry(f, k, x, 66 + FG_LEAK_LEGEND_H);
	fputs("</g>\n", f);
}

/* The box of node I at row DEPTH, OFF bytes from the left, then its visible
 * children left to right, largest first. */
static void svg_box(const struct svg_out *o, size_t i, uint64_t off, int depth)
{
	const struct flame_node *nd = &o->t->nodes[i];
	double x = FG_PAD + (double)off * o->scale, w = (double)nd->bytes * o->scale;
	double y = o->root_y - depth * FG_ROW_H;
	double share = o->t->nodes[0].bytes ? 100.0 * (double)nd->bytes / (double)o->t->nodes[0].bytes : 0;
	char colour[24], human[24];
	FILE *f = o->f;
	size_t c;

	fprintf(f, "<g class=\"f%s\" data-k=\"%s\" data-n=\"", nd->inlined ? " inl" : "",
		fg_palettes[nd->kind].name);
	xml_put(f, nd->name, SIZE_MAX);
	fputs("\" data-m=\"", f);
	if (nd->module)
		xml_put(f, nd->module, SIZE_MAX);
	fprintf(f, "\" data-b=\"%" PRIu64 "\" data-a=\"%" PRIu64 "\" data-o=\"%" PRIu64 "\" data-d=\"%d\">",
		nd->bytes, nd->allocations, off, depth);

	/* The tooltip: name, module, bytes and share, one per line. */
	fputs("<title>", f);
	xml_put(f, nd->name, SIZE_MAX);
	if (nd->inlined)
		fputs(" (inlined)", f);
	if (nd->module) {
		fputs("\nmodule: ", f);
		xml_put(f, nd->module, SIZE_MAX);
	}
	report_human_bytes(human, sizeof(human), (double)nd->bytes);
	fprintf(f, "\n%s (%" PRIu64 " bytes, %.2f%%) in %" PRIu64 " allocation%s</title>",
		human, nd->bytes, share, nd->allocations, nd->allocations == 1 ? "" : "s");

	kind_colour(colour, sizeof(colour), nd->kind, nd->name);
	fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" rx=\"2\" fill=\"%s\"/>",
		x, y, w, FG_ROW_H - 1, colour);
	fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + FG_LABEL_PAD, y + FG_ROW_H - 5);
	xml_put_fit(f, nd->name, label_chars(w));
	fputs("</text></g>\n", f);

	for (c = nd->child; c != FLAME_NO_NODE; c = o->t->nodes[c].sibling) {
		if (!box_visible(o, &o->t->nodes[c]))
			break;
		svg_box(o, c, off, depth + 1);
		off += o->t->nodes[c].bytes;
	}
}

static int svg_empty(FILE *f, const struct report *r)
{
	svg_open(f, FG_EMPTY_H, r);
	svg_titles(f, r);
	fprintf(f, "<text id=\"empty\" x=\"%.1f\" y=\"90\" text-anchor=\"middle\">"
		   "No outstanding allocations: nothing to draw.</text>\n</svg>\n",
		FG_IMAGE_W / 2);
	return report_stream_status(f);
}

int report_write_svg(FILE *f, const struct report *r, unsigned int top)
{
	struct flame_tree t;
	struct svg_out o;
	double height, head_h;
	bool leak_row;
	int err, rows;

	err = flame_tree_build(&t, r, top);
	if (err) {
		flame_tree_free(&t);
		return err;
	}
	if (!t.nodes[0].bytes) {
		err = svg_empty(f, r);
		flame_tree_free(&t);
		return err;
	}

	o = (struct svg_out){ .f = f, .t = &t, .scale = FG_GRAPH_W / (double)t.nodes[0].bytes };
	leak_row = tree_has_leak_kinds(&t);
	head_h = FG_HEAD_H + (leak_row ? FG_LEAK_LEGEND_H : 0);
	rows = 1 + visible_height(&o, 0);
	height = head_h + rows * FG_ROW_H + FG_FOOT_H;
	o.root_y = head_h + (rows - 1) * FG_ROW_H;

	svg_open(f, height, r);
	svg_titles(f, r);
	svg_controls(f, leak_row);
	fprintf(f, "<g id=\"frames\" data-total=\"%" PRIu64 "\" data-pad=\"%.1f\" data-width=\"%.1f\" "
		   "data-char-w=\"%.2f\" data-label-pad=\"%.1f\" data-min-chars=\"%d\">\n",
		t.nodes[0].bytes, FG_PAD, FG_GRAPH_W, FG_CHAR_W, FG_LABEL_PAD, FG_MIN_LABEL_CHARS);
	svg_box(&o, 0, 0, 0);
	fputs("</g>\n", f);
	fprintf(f, "<text id=\"details\" x=\"%.1f\" y=\"%.1f\"> </text>\n", FG_PAD, height - 10);
	fprintf(f, "<text id=\"matched\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\"> </text>\n",
		FG_IMAGE_W - FG_PAD, height - 10);
	fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", svg_script);
	flame_tree_free(&t);
	return report_stream_status(f);
}

