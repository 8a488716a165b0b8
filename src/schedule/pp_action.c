/* pp_action.c -- what a list says about its backwards (pp_action.h). */
#include "pp_action.h"

#include <stdlib.h>

/* A backward is split when its W comes later: walk from the end, remembering
 * the (mb, chunk) pairs whose W has been seen.  Entries with a negative mb
 * or chunk (a broken list the simulator will refuse) are never split. */
void pp_split_marks(const struct pp_action *a, int n, unsigned char *split)
{
    int mbs = 0, chunks = 0;
    for (int i = 0; i < n; i++) {
        split[i] = 0;
        if (a[i].kind == PP_WGT && a[i].mb >= mbs) mbs = a[i].mb + 1;
        if (a[i].kind == PP_WGT && a[i].chunk >= chunks) chunks = a[i].chunk + 1;
    }
    if (!mbs || !chunks) return;
    unsigned char *w = calloc((size_t)mbs * (size_t)chunks, 1);
    for (int i = n - 1; i >= 0; i--) {
        if (a[i].mb < 0 || a[i].chunk < 0) continue;
        if (a[i].kind == PP_WGT) {
            if (w) w[(size_t)a[i].mb * (size_t)chunks + (size_t)a[i].chunk] = 1;
        } else if (a[i].kind == PP_BWD && a[i].mb < mbs && a[i].chunk < chunks) {
            if (w) {
                split[i] = w[(size_t)a[i].mb * (size_t)chunks + (size_t)a[i].chunk];
                continue;
            }
            for (int j = i + 1; j < n && !split[i]; j++) /* (no memory for the table: look ahead) */
                split[i] = a[j].kind == PP_WGT && a[j].mb == a[i].mb && a[j].chunk == a[i].chunk;
        }
    }
    free(w);
}
