"""Import stand-in for `wandb` (e2e harness only): no run logs to Weights & Biases.

PithTrain imports `wandb` and `wandb.sdk.wandb_run.Run` at module load; it calls
`wandb.init`/`wandb.log` only when `cfg.logging.wandb` is set, which the harness never does.
"""

E2E_STUB = True


def init(*args, **kwargs):
    raise RuntimeError("e2e wandb stand-in: wandb.init called (logging.wandb must stay None)")


def log(*args, **kwargs):
    raise RuntimeError("e2e wandb stand-in: wandb.log called (logging.wandb must stay None)")
