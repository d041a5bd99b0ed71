"""Stand-in for `deep_gemm` (e2e harness only).

PithTrain imports deep_gemm at module load but calls it only for FP8 training. Every public
attribute access raises (and prints a marker that e2e/check.py looks for), so a BF16 run that
finishes proves the FP8 path was never taken.
"""

import sys

E2E_STUB = True


class DeepGemmStandInError(AttributeError):
    pass


def __getattr__(name):
    # Dunder/private probes (importlib, inspect, torch.compile's module scans) get the normal
    # AttributeError; a real use such as deep_gemm.fp8_fp4_gemm_nt is loud.
    if name.startswith("_"):
        raise AttributeError(name)
    print(f"E2E_DEEP_GEMM_TOUCHED {name}", file=sys.stderr, flush=True)
    raise DeepGemmStandInError(f"e2e deep_gemm stand-in: deep_gemm.{name} used (FP8 path taken)")
