/* flight.h -- the hang watchdog and its flight recorder (diag.hang_timeout).
 *
 * The main thread notes where it is: the step, the pipeline action, the
 * communication call it is in (communicator, operation, peer, bytes, since
 * when; a wait for messages: each one's peer and tag) and, in a ring, the
 * last FLIGHT_RING calls it finished; a few stores
 * per call, no lock, no system call (C11 atomics, the record under a
 * seqlock: flight.c).  A watchdog thread per rank wakes twice a second.  When the rank has been in one call, or one step, longer than the
 * timeout, it writes run_dir/hang.rank<R>.txt (where it is, the ring), waits
 * a few seconds for the other ranks' reports, and the lowest rank that wrote
 * one prints every rank's state to stderr, naming the ranks that wrote none
 * (frozen or dead: they stopped making progress); then every reporting rank
 * ends the process with EXIT_HANG.  The thread uses no MPI (the library is
 * initialised MPI_THREAD_FUNNELED) and nothing a frozen peer could block:
 * only the run directory, which every rank of a run reads and writes
 * anyway (checkpoints, restart). */
#ifndef TRIAD_FLIGHT_H
#define TRIAD_FLIGHT_H

#include <stdint.h>

enum { FLIGHT_RING = 16, FLIGHT_PEERS = 4 };

/* Start the watchdog (timeout > 0) for this rank of world, reporting into
 * run_dir; flight_stop ends it. */
void flight_start(const char *run_dir, int rank, int world, double timeout);
void flight_stop(void);

/* The main thread's whereabouts: a step began; a pipeline action (kind
 * pp_kind_name) of micro-batch mb, chunk; a communication call began
 * (group, op: comm.h's enums) and ended. */
void flight_step(int64_t step);
/* Work between steps made progress (an evaluation a batch, a checkpoint a
 * tensor, or a background writer a piece while the main thread waits for
 * it): the step's clock starts again, so long work that advances is not
 * taken for a hang, and work that stalls is. */
void flight_progress(void);
void flight_action(int kind, int mb, int chunk);
/* Work outside triad's communication calls that a report names while it
 * lasts (what: a string that outlives it, a literal), NULL when it ends:
 * a library's collective calls, which triad cannot see one by one. */
void flight_within(const char *what);
void flight_begin(int group, int op, int peer, double bytes);
void flight_end(void);
/* In a wait for point-to-point messages (after flight_begin): one of them,
 * its peer, tag and bytes (the first FLIGHT_PEERS are kept). */
void flight_message(int peer, int tag, double bytes);

#endif
