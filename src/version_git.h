#define TRIAD_GIT_COMMIT "0fd4cf483a-dirty"
