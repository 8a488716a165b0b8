/* pp_action.h -- one action of a pipeline rank's list (pipeline.h: the
 * schedules, their contract and the simulator; pp_file.h: lists read from
 * a file). */
#ifndef TRIAD_PP_ACTION_H
#define TRIAD_PP_ACTION_H

enum pp_kind {
    PP_RECV_ACT,  /* wait for the input activation of (mb, chunk) from peer = previous rank */
    PP_FWD,       /* forward of (mb, chunk) */
    PP_SEND_ACT,  /* send the output activation of (mb, chunk) to peer = next rank */
    PP_RECV_GRAD, /* wait for the gradient w.r.t. (mb, chunk)'s output from peer = next rank */
    PP_BWD,       /* backward of (mb, chunk) */
    PP_SEND_GRAD, /* send the gradient w.r.t. (mb, chunk)'s input to peer = previous rank */
    PP_WGT        /* weight gradient of (mb, chunk): its BWD, earlier, then computed input gradients only */
};

enum { PP_TAG_ACT = 0, PP_TAG_GRAD = 1 }; /* MPI tags: one per direction */

/* chunk is this rank's chunk (0 .. v-1); the peer's chunk follows from the
 * virtual stage: sender's s = chunk*pp + rank, receiver's s +- 1.
 * peer is a rank of pp_comm for communication, -1 for compute. */
struct pp_action {
    enum pp_kind kind;
    int mb, chunk, peer;
};

#endif
