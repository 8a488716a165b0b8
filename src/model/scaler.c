/* scaler.c -- dynamic loss scaling. */
#include "scaler.h"

#include <string.h>

void scaler_init(struct loss_scaler *s, const struct config *cfg)
{
    memset(s, 0, sizeof *s);
    s->dynamic = cfg->train.precision_id == TRAIN_PRECISION_fp16;
    s->scale = s->dynamic ? cfg->train.loss_scale : 1.0;
    s->growth = cfg->train.loss_scale_growth;
    s->backoff = cfg->train.loss_scale_backoff;
    s->min_scale = cfg->train.loss_scale_min;
    s->window = cfg->train.loss_scale_window;
    s->hysteresis = cfg->train.loss_scale_hysteresis;
    s->hysteresis_left = s->hysteresis;
}

int scaler_update(struct loss_scaler *s, int overflow)
{
    if (!s->dynamic) return 0;
    double old = s->scale;
    if (overflow) {
        s->good_steps = 0;
        if (--s->hysteresis_left <= 0) /* spent: every further overflow backs off until the scale grows */
            s->scale = s->scale * s->backoff > s->min_scale ? s->scale * s->backoff : s->min_scale;
    } else if (++s->good_steps >= s->window) {
        s->good_steps = 0;
        s->hysteresis_left = s->hysteresis;
        s->scale *= s->growth;
    }
    return s->scale != old;
}
