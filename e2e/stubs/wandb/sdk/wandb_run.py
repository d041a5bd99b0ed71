"""Import stand-in for `wandb.sdk.wandb_run` (e2e harness only): only the type name is used."""


class Run:
    """Placeholder for the annotation `Optional[WandbRun]`; never instantiated."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("e2e wandb stand-in: Run instantiated")
