/* config.h -- the run's configuration, generated from params.def. */
#ifndef TRIAD_CONFIG_H
#define TRIAD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "deck.h" /* struct deck_error: a problem in a deck or an override */

#define CONFIG_STRLEN 512 /* STR and ENUM values, including the NUL */

/* The C enum of each ENUM key, generated from its word list: enum
 * train_device { TRAIN_DEVICE_cpu, TRAIN_DEVICE_cuda }, ... */
#define CONFIG_ENUMERATOR(P, word) P##_##word,
#define GROUP(g, doc)
#define END_GROUP(g)
#define INT(g, k, def, lo, hi, doc)
#define REAL(g, k, def, lo, hi, doc)
#define BOOL(g, k, def, doc)
#define STR(g, k, def, doc)
#define ENUM(g, k, def, choices, doc) enum g##_##k { choices(CONFIG_ENUMERATOR, choices) };
#include "params.def"

/* struct config: one nested struct per namelist group, one field per key,
 * e.g. cfg.model.n_layer, cfg.train.lr, cfg.data.path; an ENUM key also
 * has its enum, cfg.train.device_id.  Plain data: it is broadcast as bytes. */
#define GROUP(g, doc) struct {
#define END_GROUP(g) } g;
#define INT(g, k, def, lo, hi, doc) int64_t k;
#define REAL(g, k, def, lo, hi, doc) double k;
#define BOOL(g, k, def, doc) int k;
#define STR(g, k, def, doc) char k[CONFIG_STRLEN];
#define ENUM(g, k, def, choices, doc) char k[CONFIG_STRLEN]; enum g##_##k k##_id;
struct config {
#include "params.def"
};

/* Fill every key with its default. */
void config_defaults(struct config *cfg);

/* Parse the namelist text of `path` into cfg (on top of what cfg holds).
 * Returns 0, or -1 with *err filled.  Never prints. */
int config_read_file(struct config *cfg, const char *path, struct deck_error *err);
int config_read_string(struct config *cfg, const char *text, const char *name,
                       struct deck_error *err);

/* Apply one command-line override "group.key=value". */
int config_override(struct config *cfg, const char *arg, struct deck_error *err);
/* The "group.key" an override names, as config_override reads it (blanks
 * around each part left out, lower case), into name[0..n). */
void config_override_name(const char *arg, char *name, size_t n);
/* Is key ("group.key", lower case) among the n overrides? */
int config_override_given(int n, char *const *overrides, const char *key);
/* The overrides that set a training's testing aids aside, for the commands
 * that read a checkpoint's deck on another grid (sample, eval): a rank an
 * aid names may be past it. */
#define CONFIG_TRAINING_AIDS_OFF                                                                                  \
    "diag.slow_rank=-1", "diag.corrupt_rank=-1", "diag.inject_overflow_step=0", "diag.inject_nan_step=0",        \
        "diag.hang_timeout=0"

/* Give the keys whose default is the family's (model.tie_embeddings) their
 * value, after the deck and the overrides are read. */
void config_resolve(struct config *cfg);

/* Cross-checks that need several keys or the world size (divisibility,
 * features not available, ...).  world <= 0 skips checks that need it.
 * Returns 0, or -1 with *err filled (file/line 0, what + hint). */
int config_validate(const struct config *cfg, int world, struct deck_error *err);

/* A deck's keys that nothing reads with the keys beside them (a mixture's
 * without experts, fp16's loss scale in another precision, ...), each set
 * to other than its default: refused, for the decks a user gives (train,
 * check, plan, schedule), not for the decks stored in checkpoints.  0, or
 * -1 with *err filled. */
int config_check_unread(const struct config *cfg, struct deck_error *err);

/* Format an error the way users see it:
 *   deck.nml:12:5: error: unknown key 'n_layers' in &model
 *     hint: did you mean 'n_layer'? */
void config_error_print(FILE *f, const struct deck_error *err);

/* Echo the effective deck (all keys, defaults filled) as a valid namelist. */
void config_echo(FILE *f, const struct config *cfg);

/* Markdown reference of every key (docs/input.md). */
void config_doc_markdown(FILE *f);

/* Is the ENUM/STR value `v` equal to `word` (case-insensitive)? */
int config_is(const char *v, const char *word);

#endif
