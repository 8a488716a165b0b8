/* pp_action.h -- one action of a pipeline rank's list (pipeline.h: the
 * schedules, their contract and the simulator; pp_file.h: lists read from
 * a file). */
#ifndef TRIAD_PP_ACTION_H
#define TRIAD_PP_ACTION_H

enum pp_kind {
    PP_RECV_ACT,  /* wait for the input activation of (mb, chunk) from peer = the rank of the stage before */
    PP_FWD,       /* forward of (mb, chunk) */
    PP_SEND_ACT,  /* send the output activation of (mb, chunk) to peer = the rank of the stage after */
    PP_RECV_GRAD, /* wait for the gradient w.r.t. (mb, chunk)'s output from peer = the rank of the stage after */
    PP_BWD,       /* backward of (mb, chunk): the input gradient only ("B") when a PP_WGT of the same
                   * (mb, chunk) comes later in the list (pp_split_marks), else input and weight
                   * gradients at once (the fused backward) */
    PP_SEND_GRAD, /* send the gradient w.r.t. (mb, chunk)'s input to peer = the rank of the stage before */
    PP_WGT        /* weight gradient of (mb, chunk) ("W", zero-bubble schedules): from what its PP_BWD kept
                   * (the layers' inputs and output gradients); a compute, peer -1, no message */
};

enum { PP_TAG_ACT = 0, PP_TAG_GRAD = 1 }; /* MPI tags: one per direction */

/* chunk is this rank's chunk (0 .. v-1); the peer's chunk follows from the
 * virtual stage (pipeline.h: pp_virtual_stage, pp_stage_place): the
 * sender's stage s, the receiver's s + 1 (activations) or s - 1
 * (gradients).  peer is a rank of pp_comm for communication (the rank
 * itself when both stages are its own, as at the turn of zbv's V), -1 for
 * compute. */
struct pp_action {
    enum pp_kind kind;
    int mb, chunk, peer;
};

/* split[i] = 1 for a PP_BWD whose PP_WGT (same mb and chunk) comes later in
 * the list a of n actions (an input-gradient-only backward), else 0. */
void pp_split_marks(const struct pp_action *a, int n, unsigned char *split);

#endif
