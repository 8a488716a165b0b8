/* exit_status.h -- the statuses a triad process ends with (docs/formats.md,
 * "Exit status"), for every layer that ends one: the driver, the fatal
 * errors of log.c and the hang watchdog of flight.c. */
#ifndef TRIAD_EXIT_STATUS_H
#define TRIAD_EXIT_STATUS_H

enum exit_status {
    EXIT_DONE = 0,    /* the work is done */
    EXIT_ERROR = 1,   /* input, configuration, I/O or numerics */
    EXIT_STOPPED = 3, /* stopped cleanly before the end (signal, time limit, stop file): requeue */
    EXIT_HANG = 4     /* the hang watchdog ended the job (diag.hang_timeout) */
};

#endif
