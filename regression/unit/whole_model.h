/* whole_model.h -- the unit tests' view of a model held whole by one
 * pipeline rank (pp = 1, v = 1): forward and backward of one micro-batch
 * through slot 0. */
#ifndef TRIAD_WHOLE_MODEL_H
#define TRIAD_WHOLE_MODEL_H

#include "model.h"

static inline double whole_forward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets)
{
    struct chunk_acts *a = &m->slot[0];
    a->chunk = 0;
    model_set_tokens(m, a, inputs, targets);
    return model_chunk_forward(m, c, a);
}

static inline void whole_backward(struct model *m, struct comm *c, float dloss)
{
    model_chunk_backward(m, c, &m->slot[0], dloss);
}

#endif
