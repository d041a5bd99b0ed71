"""Import stand-in for `wandb.sdk` (e2e harness only)."""
