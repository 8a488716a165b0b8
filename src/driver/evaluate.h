/* evaluate.h -- `mpirun -n N triad eval CKPT [group.key=value ...]`: a
 * checkpoint's model judged on any grid, by the forwards of the training
 * schedule (CPU or CUDA, as train.device says).
 *
 * The deck is the checkpoint's own with its grid reset (tp = cp = pp =
 * virtual_stages = ep = 1, dp = 0: the launched ranks replicate; ZeRO off,
 * micro_batch_size = 0) and the command line's overrides on top: the grid
 * (parallel.*), the data (data.val_path, data.kind, train.batch_size,
 * train.eval_batches), the tasks (&eval), the device.  It prints the
 * held-out loss of data.val_path (the mean over its first eval_batches
 * global batches, as train.eval_every computes it; eval_batches = 0: every
 * whole one, the sequences past the last said on stderr), its perplexity and
 * bits per byte (the loss in bits over the UTF-8 bytes the targets decode
 * to: text's bytes, or the model's tokenizer's text of the tokens, a
 * document at a time), the
 * tokens it covers and the checkpoint's training tokens, then each task's
 * acc and acc_norm (mc_eval.h); eval.scores gets every choice's
 * log-probability. */
#ifndef TRIAD_EVALUATE_H
#define TRIAD_EVALUATE_H

/* Collective over MPI_COMM_WORLD; the exit status. */
int evaluate_checkpoint(const char *ckpt, int noverride, char **overrides);

#endif
