/* llmc_driver.c -- the training loop of bench/llmc_bench.sh around llm.c's
 * CPU trainer.  Compiled against a copy of karpathy/llm.c (never kept in
 * this repository): train_gpt2.c is included with TESTING defined, which
 * leaves out its own main (its test_gpt2.c does the same), and this main
 * calls its functions unchanged.  Unlike train_gpt2.c's main it reads the
 * weights and the token shard it is given, without shuffling (the windows
 * in order, as triad takes them), and runs only timed training steps: no
 * validation and no sampling between them.
 *
 *   triad_llmc_bench WEIGHTS.bin 'TOKENS*.bin' STEPS B T LR
 *
 * prints one line a step: "step S loss L ms M" (S from 1). */
#define TESTING
#include "train_gpt2.c"

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s WEIGHTS.bin 'TOKENS*.bin' STEPS B T LR\n", argv[0]);
        return 1;
    }
    int steps = atoi(argv[3]), B = atoi(argv[4]), T = atoi(argv[5]);
    float lr = (float)atof(argv[6]);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, argv[1]);
    DataLoader loader;
    dataloader_init(&loader, argv[2], B, T, 0, 1, 0); /* rank 0 of 1, no shuffle */
    for (int step = 1; step <= steps; step++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        dataloader_next_batch(&loader);
        gpt2_forward(&model, loader.inputs, loader.targets, B, T);
        gpt2_zero_grad(&model);
        gpt2_backward(&model);
        gpt2_update(&model, lr, 0.9f, 0.999f, 1e-8f, 0.0f, step);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("step %d loss %.9g ms %.3f\n", step, model.mean_loss, ms);
        fflush(stdout);
    }
    dataloader_free(&loader);
    gpt2_free(&model);
    return 0;
}
