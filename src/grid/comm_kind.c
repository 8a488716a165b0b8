/* comm_kind.c -- the names of communicators and operations (comm_kind.h). */
#include "comm_kind.h"

const char *comm_group_name(enum comm_group g)
{
    static const char *const names[CG_COUNT] = {"world", "tp", "dp", "pp", "embed", "cp", "ep", "edp"};
    return (unsigned)g < CG_COUNT ? names[g] : "?";
}

const char *comm_op_name(enum comm_op op)
{
    static const char *const names[CO_COUNT] = {"all-reduce", "all-gather", "reduce-scatter", "send", "recv",
                                                  "all-to-all"};
    return (unsigned)op < CO_COUNT ? names[op] : "?";
}
