/* config_internal.h -- what config.c shares with config_check.c. */
#ifndef TRIAD_CONFIG_INTERNAL_H
#define TRIAD_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Describe an error (line/col 0 when not applicable); clears the hint. */
void config_set_what(struct config_error *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Set the hint of the error just described; returns -1. */
int config_set_hint(struct config_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* printf at the end of buf. */
void config_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void config_error_reset(struct config_error *err, const char *file);
#define SHOW 60 /* longest user text quoted back in a message */

/* The shortest %g form of x that reads back as x. */
void config_fmt_real(char *buf, size_t n, double x);
/* The upper bound of an integer key in params.def. */
int64_t config_key_max(const char *group, const char *name);

#endif
