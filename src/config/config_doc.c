/* config_doc.c -- the registry written out: the effective deck (every key,
 * defaults filled) as a namelist, and docs/input.md (`triad --doc`). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

void config_echo(FILE *f, const struct config *cfg)
{
    char v[2 * CONFIG_STRLEN + 4];
    for (int g = 0; g < config_ngroups; g++) {
        int width = 0;
        for (int i = 0; i < config_nkeys; i++)
            if (strcmp(config_keys[i].group, config_groups[g].name) == 0 && (int)strlen(config_keys[i].name) > width)
                width = (int)strlen(config_keys[i].name);
        fprintf(f, "%s&%s\n", g ? "\n" : "", config_groups[g].name);
        for (int i = 0; i < config_nkeys; i++) {
            if (strcmp(config_keys[i].group, config_groups[g].name) != 0) continue;
            if (config_keys[i].type == KEY_BOOL && *(const int *)((const char *)cfg + config_keys[i].offset) < 0) {
                /* a logical derived at start-up (plan_resolve_pack): left unset, so the echo stays a deck */
                fprintf(f, "  ! %s: unset, derived at start-up\n", config_keys[i].name);
                continue;
            }
            config_fmt_value(v, sizeof v, cfg, &config_keys[i]);
            fprintf(f, "  %-*s = %s\n", width, config_keys[i].name, v);
        }
        fprintf(f, "/\n");
    }
}

/* ------------------------------------------------------------ documentation */

static const char doc_intro[] =
    "# triad input reference\n"
    "\n"
    "<!-- Generated from src/config/params.def by `triad --doc` (`make input-docs`). Do not edit. -->\n"
    "\n"
    "triad reads its settings from an input deck in Fortran namelist syntax.\n"
    "Every key has a default, so a deck names only what differs from it.\n"
    "`triad check deck.nml` validates a deck and prints the effective deck:\n"
    "every key, defaults filled in, itself a valid deck (a logical that a run\n"
    "derives at start-up, `train.pack_activations` left unset, as a comment).\n"
    "\n"
    "## Syntax\n"
    "\n"
    "```fortran\n"
    "! a small model on a text file\n"
    "&model\n"
    "  n_layer = 4, n_head = 4, d_model = 128   ! commas between keys are optional\n"
    "  seq_len = 64\n"
    "  vocab_size = 256\n"
    "/\n"
    "&train\n"
    "  steps = 200, batch_size = 16\n"
    "  lr = 1d-3, min_lr = 1.0e-4               ! e or d exponents\n"
    "  warmup_steps = 20\n"
    "/\n"
    "&data kind = 'text', path = \"input.txt\" /\n"
    "```\n"
    "\n"
    "- A group starts with `&name` and ends with `/` (or `&end`); the older\n"
    "  `$name` ... `$end` reads the same. A deck holds any number of groups, in\n"
    "  any order. Group and key names are case-insensitive.\n"
    "- `!` starts a comment that runs to the end of the line, anywhere outside a string.\n"
    "  Lines end with LF or CR LF (a lone CR, as old Mac editors wrote, is refused:\n"
    "  Fortran reads no line end there); a UTF-8 byte order mark at the start is skipped.\n"
    "- Values: integers (`12`, `-3`), reals (`0.5`, `6e-4`, `1.5d-3`),\n"
    "  logicals (`.true.`, `.false.`, `.t.`, `.f.`, `T`, `F`), and strings in single or\n"
    "  double quotes; a quote is written twice inside a string quoted with it\n"
    "  (`'it''s'`). A string ends on its line.\n"
    "- A value list may continue over several lines; `3*0.5` repeats a value\n"
    "  three times. Every key below takes a single value. A blank comes between a\n"
    "  value and a following `&end` (gfortran reads `5&end` as no value at all).\n"
    "- A key may appear only once in a deck, and a group only once: a Fortran\n"
    "  program reads the first `&name` and never sees a second one, so triad\n"
    "  refuses a repeated group rather than merge it.\n"
    "- What a Fortran compiler reads, triad reads to the same value or refuses\n"
    "  with an error naming the line. It refuses: text outside a group (gfortran\n"
    "  skips it, so a key written there would be silently ignored); null values\n"
    "  (`key = ,` or `1*`, which leave the default in Fortran); a string continued\n"
    "  on the next line; the looser logicals (`true`, `.t`, `.false.yes`); reals\n"
    "  without an exponent letter (`1.5-3`) or with `q`; `inf` and `nan`; reals\n"
    "  beyond a double's range (gfortran makes them infinite, 0 or subnormal);\n"
    "  a key's substring or element (`path(1:3) = ...`). Unlike a Fortran\n"
    "  character variable, where they are padding, a string keeps its trailing blanks.\n"
    "\n"
    "Any key can be overridden on the command line as `group.key=value`, after\n"
    "the deck, with the same value syntax and checks (a key given twice there:\n"
    "the last counts, so a job script's default can be overridden after it); a\n"
    "string value needs no quotes there:\n"
    "\n"
    "```sh\n"
    "triad check deck.nml train.steps=100 train.lr=3e-4 data.path=other.txt\n"
    "```\n"
    "\n"
    "Besides the ranges below, a deck is checked as a whole before anything is\n"
    "allocated: `n_head` divides `d_model`; `world = tp * cp * dp * pp` (`dp = 0`\n"
    "is derived); `seq_len` is divisible by `2 * cp`; `batch_size` is divisible by\n"
    "`dp * micro_batch_size`;\n"
    "`min_lr <= lr`; `warmup_steps <= steps`; `kind = 'text'` or `'tokens'` needs\n"
    "`path` (and `'text'` needs `vocab_size >= 256`); one micro-batch fits the\n"
    "kernels' 32-bit indices; a step has at most 1048576 forwards per rank\n"
    "(`virtual_stages` times the micro-batches per replica). A key set to other\n"
    "than its default where nothing reads it is refused too: a mixture's keys\n"
    "without experts (`n_expert = 0`), `moe_shared_gate` without shared experts,\n"
    "fp16's loss-scale keys in another precision, `pack_activations` in fp32,\n"
    "`min_lr` with the constant schedule, `rope_theta` for gpt2, `shuffle` of the\n"
    "synthetic task (a deck that resumes a run from a checkpoint gets a warning\n"
    "instead, and one stored in a checkpoint is not held to this). Every\n"
    "error names the key, the place and the fix.\n";

/* Markdown table cell text: escape what would break the table or emphasis. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (strchr("|*_<>`\\[]", *s)) fputc('\\', f);
        fputc(*s, f);
    }
}

static void doc_allowed(char *buf, size_t n, const struct key_info *k)
{
    char lo[32], hi[32];
    switch (k->type) {
    case KEY_INT:
        if (k->imax == INT64_MAX)
            snprintf(buf, n, ">= %" PRId64, k->imin);
        else
            snprintf(buf, n, "%" PRId64 " ... %" PRId64, k->imin, k->imax);
        break;
    case KEY_REAL:
        config_fmt_real(lo, sizeof lo, k->rmin);
        config_fmt_real(hi, sizeof hi, k->rmax);
        snprintf(buf, n, "%s ... %s", lo, hi);
        break;
    case KEY_BOOL: snprintf(buf, n, "`.true.`, `.false.`"); break;
    case KEY_STR: snprintf(buf, n, "up to %d bytes", CONFIG_STRLEN - 1); break;
    case KEY_ENUM: config_fmt_choices(buf, n, k->choices, "`'", "'`"); break;
    }
}

void config_doc_markdown(FILE *f)
{
    static const char *const type_name[] = { "integer", "real", "logical", "string", "choice" };
    struct config def;
    char v[2 * CONFIG_STRLEN + 4], allowed[256];
    config_defaults(&def);
    fputs(doc_intro, f);
    for (int g = 0; g < config_ngroups; g++) {
        fprintf(f, "\n## `&%s`: ", config_groups[g].name);
        md_cell(f, config_groups[g].doc);
        fprintf(f, "\n\n");
        fprintf(f, "| key | type | default | allowed | description |\n");
        fprintf(f, "| --- | --- | --- | --- | --- |\n");
        for (int i = 0; i < config_nkeys; i++) {
            const struct key_info *k = &config_keys[i];
            if (strcmp(k->group, config_groups[g].name) != 0) continue;
            config_fmt_value(v, sizeof v, &def, k);
            doc_allowed(allowed, sizeof allowed, k);
            if (k->type == KEY_BOOL && k->idef < 0) /* unset: derived (config_resolve, plan_resolve_pack) */
                fprintf(f, "| `%s` | %s | derived | %s | ", k->name, type_name[k->type], allowed);
            else
                fprintf(f, "| `%s` | %s | `%s` | %s | ", k->name, type_name[k->type], v, allowed);
            md_cell(f, k->doc);
            fprintf(f, " |\n");
        }
    }
}
