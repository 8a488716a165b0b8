/* comm_kind.h -- what a communication call is: its communicator and its
 * operation, with their names.  Below comm.c and the flight recorder alike:
 * comm.c counts and records calls by these, flight.c names them in its
 * reports. */
#ifndef TRIAD_COMM_KIND_H
#define TRIAD_COMM_KIND_H

/* CG_DP spans the dp * cp ranks holding replicas of one shard (topo.h);
 * CG_CP carries ring attention's blocks; CG_EP a mixture's tokens to their
 * experts and back; CG_EDP sums the experts' gradients over their replicas. */
enum comm_group { CG_WORLD, CG_TP, CG_DP, CG_PP, CG_EMBED, CG_CP, CG_EP, CG_EDP, CG_COUNT };
enum comm_op { CO_ALLREDUCE, CO_ALLGATHER, CO_REDUCE_SCATTER, CO_SEND, CO_RECV, CO_ALLTOALL, CO_COUNT };

/* "tp", "all-reduce", ...; "?" for a value out of range. */
const char *comm_group_name(enum comm_group g);
const char *comm_op_name(enum comm_op op);

#endif
