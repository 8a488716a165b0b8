/* scaler.h -- the dynamic loss scale of fp16 training (docs/precision.md).
 *
 * The loss (and so every gradient) is multiplied by `scale` so that small
 * gradients survive fp16; the gradients are divided by it again before the
 * update.  A step whose gradients overflowed anywhere is skipped on every
 * rank; each uses up one of `hysteresis`, and once none is left every
 * overflow backs the scale off (times `backoff`, not below `min_scale`);
 * after `window` steps in a row without one it grows (times `growth`) and
 * the hysteresis is restored.  bf16 and fp32 keep the scale at 1. */
#ifndef TRIAD_SCALER_H
#define TRIAD_SCALER_H

#include <stdint.h>

#include "config.h"

struct loss_scaler {
    int dynamic;              /* fp16 */
    double scale;
    double growth, backoff, min_scale;
    int64_t window, hysteresis;
    int64_t good_steps;       /* steps since the last overflow or growth */
    int64_t hysteresis_left;  /* overflows still tolerated before a backoff */
};

void scaler_init(struct loss_scaler *s, const struct config *cfg);
/* Account one step.  Returns 1 if the scale changed. */
int scaler_update(struct loss_scaler *s, int overflow);

#endif
