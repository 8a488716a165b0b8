/* mpi_test.h -- the start and end of a unit program that runs on a fixed
 * number of MPI ranks (test_tp, test_cp): rank 0 prints the TAP, every rank
 * returns its verdict. */
#ifndef TRIAD_MPI_TEST_H
#define TRIAD_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>

#include "tap.h"

/* MPI started; this rank, or -1 (after printing a SKIP plan and finalizing)
 * when the world is not `need` ranks. */
static inline int mpi_test_begin(int *argc, char ***argv, int need)
{
    MPI_Init(argc, argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world == need) return rank;
    if (rank == 0) printf("1..0 # SKIP needs exactly %d ranks (mpirun -n %d)\n", need, need);
    MPI_Finalize();
    return -1;
}

/* Rank 0's TAP verdict, on every rank; MPI finalized. */
static inline int mpi_test_end(int rank)
{
    int status = rank == 0 ? tap_done() : 0;
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}

#endif
