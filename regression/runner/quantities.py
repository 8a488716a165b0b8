"""What a case can compare, shared by the case files, the references and the
outputs; and CaseError, the error of one of those files that cannot be read."""

# Per step: the columns of /metrics in metrics.h5.
# Final: read from the run's last checkpoint (the one written at the last step).
STEP_QUANTITIES = ("loss", "grad_norm", "lr", "loss_scale", "skipped")
FINAL_QUANTITIES = ("param_norm", "optim_norm")
QUANTITIES = STEP_QUANTITIES + FINAL_QUANTITIES

# The columns of metrics.h5's /memory/allocated (bytes each rank allocated).
MEMORY_COLUMNS = ("parameters", "gradients", "optimizer", "activations")


class CaseError(Exception):
    """A case file, reference or run output that cannot be read; the message says where."""
