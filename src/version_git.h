#define TRIAD_GIT_COMMIT "ac801944a2-dirty"
