/* mapguard.h -- files mapped into memory whose bytes can vanish under the
 * run: another program truncates or rewrites one (a data shard written
 * again under the same name), or its disk or network mount fails.  The
 * kernel then raises SIGBUS at the read, which Open MPI reports as a bus
 * error with a backtrace.  A mapping made here turns that into a clear
 * error naming the file, and the process ends with EXIT_ERROR; a SIGBUS
 * elsewhere goes to the handler that was there before. */
#ifndef TRIAD_MAPGUARD_H
#define TRIAD_MAPGUARD_H

#include <stddef.h>

/* mmap(len bytes of fd, read-only, private), its bytes guarded; what names
 * the file in the message (its path).  The mapping, or NULL with errno. */
void *mapguard_map(int fd, size_t len, const char *path);
/* munmap, and the guard taken off. */
void mapguard_unmap(void *p, size_t len);

#endif
