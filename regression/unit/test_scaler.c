/* test_scaler.c -- the dynamic loss scale: growth after the window,
 * hysteresis, backoff to the floor, and the scales that stay 1. */
#include <stdio.h>

#include "config.h"
#include "scaler.h"
#include "tap.h"

static struct loss_scaler make(const char *precision, double scale, int64_t window, int64_t hysteresis,
                               double min_scale)
{
    struct config c;
    config_defaults(&c);
    char set[64];
    struct deck_error err;
    snprintf(set, sizeof set, "train.precision='%s'", precision);
    if (config_override(&c, set, &err) != 0) fprintf(stderr, "%s\n", err.what);
    c.train.loss_scale = scale;
    c.train.loss_scale_window = window;
    c.train.loss_scale_hysteresis = hysteresis;
    c.train.loss_scale_min = min_scale;
    struct loss_scaler s;
    scaler_init(&s, &c);
    return s;
}

int main(void)
{
    struct loss_scaler s = make("fp16", 1024, 3, 2, 1);
    int changed = scaler_update(&s, 0) | scaler_update(&s, 0);
    tap_ok(!changed && s.scale == 1024, "two good steps of a window of 3: the scale stays");
    tap_ok(scaler_update(&s, 0) && s.scale == 2048, "the third good step doubles it");
    tap_ok(!scaler_update(&s, 1) && s.scale == 2048 && s.good_steps == 0,
           "hysteresis 2: the first overflow is tolerated and restarts the window");
    tap_ok(scaler_update(&s, 1) && s.scale == 1024, "the second overflow halves the scale");
    tap_ok(scaler_update(&s, 1) && s.scale == 512, "with the hysteresis spent, every further overflow halves it");
    scaler_update(&s, 0), scaler_update(&s, 0), scaler_update(&s, 0);
    tap_ok(s.scale == 1024 && s.hysteresis_left == 2, "a growth restores the hysteresis");
    tap_ok(!scaler_update(&s, 1) && s.scale == 1024, "so the next overflow is tolerated again");

    struct loss_scaler f = make("fp16", 4, 1000, 1, 2);
    scaler_update(&f, 1);
    tap_ok(f.scale == 2, "a backoff stops at loss_scale_min");
    tap_ok(!scaler_update(&f, 1) && f.scale == 2, "and stays there");

    struct loss_scaler w = make("fp16", 8, 5, 1, 1);
    w.good_steps = 7; /* restored from a checkpoint of a run with a longer window */
    tap_ok(scaler_update(&w, 0) && w.scale == 16, "good steps beyond a shortened window grow the scale at once");

    struct loss_scaler b = make("bf16", 65536, 1, 1, 1);
    tap_ok(b.scale == 1 && !scaler_update(&b, 1) && !scaler_update(&b, 0) && b.scale == 1,
           "bf16: the scale is 1 and never changes");
    struct loss_scaler p = make("fp32", 65536, 1, 1, 1);
    tap_ok(p.scale == 1 && !p.dynamic, "fp32: the scale is 1");
    return tap_done();
}
