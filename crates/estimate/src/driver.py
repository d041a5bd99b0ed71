"""memprints' driver for PithTrain's memory estimator (``tools/memory_estimator``).

memprints runs this file as ``python3 -I -c <this file> MODE TREE ...``; it never writes into the
user's tree. Both modes put TREE first on ``sys.path`` and refuse any import of ``torch`` (the
estimator is pure Python; a torch import means something is wrong, so it fails loudly).

``json TREE RANKS FLAG...``: runs the estimator's own command line (``main()``) once per pp rank in
RANKS (comma-separated) with FLAG... plus ``--pp-rank R``, keeps the ``ScheduleResult`` that each
``run_estimate`` call returns, and prints one line: MARKER, then JSON of the figures memprints
compares (bytes, as the estimator computed them). The estimator's text goes to a buffer; only its
status line is read from it.

``text TREE FLAG...``: runs ``python -m tools.memory_estimator FLAG...`` as is (the fallback when
the estimator's objects no longer look as this driver expects).

Exit codes: 0 done; 3 the estimator stopped (its own message is on stderr); 4 the estimator's
objects do not look as expected (memprints falls back to the text mode); 5 something imported
torch.
"""

import contextlib
import dataclasses
import importlib
import importlib.abc
import io
import json
import re
import runpy
import sys
import traceback

MARKER = "MEMPRINTS-ESTIMATE-JSON "
DRIVER_VERSION = 1
EXIT_ESTIMATOR_FAILED = 3
EXIT_INTERFACE_CHANGED = 4
EXIT_TORCH_IMPORTED = 5

# `p0.c1.L2.s1.ag.flash_Q`, `p1.c0.prolog.outs.hidden`, `p1.c0.epilog.ag.norm_input`.
SPEC_PART = re.compile(r"^p\d+\.c\d+\.(?:L(\d+)\.s(\d+)|(prolog|epilog))\.")
STATUS = re.compile(r"STATUS: (OK|TIGHT|OOM)")


class TorchGuard(importlib.abc.MetaPathFinder):
    """Refuses `import torch` (and its submodules) and remembers who asked."""

    def __init__(self):
        self.attempts = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            self.attempts.append(fullname)
            raise ImportError(f"memprints: the memory estimator must not import {fullname}")
        return None


def stop_if_torch(guard):
    if guard.attempts or "torch" in sys.modules:
        name = guard.attempts[0] if guard.attempts else "torch"
        print(f"memprints: the memory estimator imported {name}", file=sys.stderr)
        sys.exit(EXIT_TORCH_IMPORTED)


def interface_changed(what):
    print(f"memprints: the estimator's objects changed: {what}", file=sys.stderr)
    sys.exit(EXIT_INTERFACE_CHANGED)


def bucket_bytes(bucket):
    return int(bucket.total_bytes)


def live_chunks(snapshot):
    """(phase, chunk, bytes) of every live chunk: its LayerRecord plus autograd tensors."""
    out = []
    for key in sorted(snapshot.activations):
        records = bucket_bytes(snapshot.activations[key])
        autograd = snapshot.autograd_overhead.get(key)
        out.append([key[0], key[1], records + (bucket_bytes(autograd) if autograd else 0)])
    return out


def layer_parts(timeline):
    """Records and autograd bytes per layer stage (and prolog/epilog) of one chunk per phase."""
    parts = []
    for phase in (0, 1):
        snapshot = next((e.snapshot for e in timeline if phase_live(e.snapshot, phase)), None)
        if snapshot is None:
            continue
        key = min(k for k in snapshot.activations if k[0] == phase)
        sums = {}
        for kind, bucket in (
            ("records", snapshot.activations[key]),
            ("autograd", snapshot.autograd_overhead.get(key)),
        ):
            for spec in bucket.specs if bucket else ():
                match = SPEC_PART.match(spec.name)
                if match is None:
                    part = ("other", None, None)
                elif match.group(3):
                    part = (match.group(3), None, None)
                else:
                    part = ("layer", int(match.group(1)), int(match.group(2)))
                entry = sums.setdefault(part, {"records": 0, "autograd": 0, "moe": False})
                entry[kind] += int(spec.bytes)
                entry["moe"] = (
                    entry["moe"] or "topk" in spec.name or ".s3.ag.scattered" in spec.name
                )
        for (kind, layer, stage), entry in sums.items():
            parts.append(
                {
                    "phase": phase,
                    "part": kind,
                    "layer": layer,
                    "stage": stage,
                    "records_bytes": entry["records"],
                    "autograd_bytes": entry["autograd"],
                    "moe": entry["moe"],
                }
            )
    return parts


def phase_live(snapshot, phase):
    return any(k[0] == phase for k in snapshot.activations)


def rotary_bytes(bucket):
    return sum(int(s.bytes) for s in bucket.specs if "rotary_emb" in s.name)


def model_fields(model_cfg):
    if dataclasses.is_dataclass(model_cfg):
        return {f.name: getattr(model_cfg, f.name) for f in dataclasses.fields(model_cfg)}
    return dict(vars(model_cfg))


def describe(pp_rank, kwargs, result, text):
    model_cfg = kwargs["model_cfg"]
    parallel = kwargs["parallel_cfg"]
    peak = result.timeline[result.peak_event_idx].snapshot
    status = STATUS.search(text)
    num_chunks = parallel.global_batch_size // (
        parallel.micro_batch_size * parallel.dp_size * parallel.ep_size
    )
    return {
        "pp_rank": pp_rank,
        "model": model_fields(model_cfg),
        "parallel": {
            "pp": parallel.pp_size,
            "ep": parallel.ep_size,
            "dp": parallel.dp_size,
            "cp": parallel.cp_size,
            "micro_batch_size": parallel.micro_batch_size,
            "global_batch_size": parallel.global_batch_size,
            "sequence_length": parallel.sequence_length,
            "num_chunks": num_chunks,
        },
        "gpu_memory_bytes": int(kwargs["gpu_memory_gb"] * 1024**3),
        "status": status.group(1) if status else None,
        "non_pytorch_bytes": int(peak.non_pytorch_bytes),
        "fragmentation_factor": float(peak.fragmentation_factor),
        "peak_index": int(result.peak_event_idx),
        "peak_total_bytes": int(result.peak_bytes),
        "params": [
            {"name": b.name, "bytes": bucket_bytes(b), "rotary_bytes": rotary_bytes(b)}
            for b in peak.params_unsharded
        ],
        "fsdp_sharded_bytes": bucket_bytes(peak.fsdp_sharded_params),
        "optimizer": {
            "name": peak.optimizer_states.name,
            "bytes": bucket_bytes(peak.optimizer_states),
        },
        "timeline": [
            {
                "name": e.name,
                "static_bytes": int(e.snapshot.static_bytes),
                "activation_bytes": int(e.snapshot.activation_bytes),
                "autograd_bytes": int(e.snapshot.autograd_bytes),
                "gradient_bytes": bucket_bytes(e.snapshot.gradients),
                "comm_bytes": bucket_bytes(e.snapshot.comm_buffers),
                "wgrad_store_bytes": bucket_bytes(e.snapshot.weight_grad_store),
                "pp_transfer_bytes": bucket_bytes(e.snapshot.pp_transfer_buffers),
                "fragmentation_bytes": int(e.snapshot.fragmentation_bytes),
                "total_bytes": int(e.snapshot.total_bytes),
                "live": live_chunks(e.snapshot),
            }
            for e in result.timeline
        ],
        "layers": layer_parts(result.timeline),
    }


def run_json(ranks, flags, guard):
    cli = importlib.import_module("tools.memory_estimator.__main__")
    stop_if_torch(guard)
    if not callable(getattr(cli, "main", None)) or not callable(getattr(cli, "run_estimate", None)):
        interface_changed("tools/memory_estimator/__main__.py has no main() and run_estimate()")
    original = cli.run_estimate
    out = []
    for pp_rank in ranks:
        calls = []

        def recording(*args, **kwargs):
            result = original(*args, **kwargs)
            calls.append((kwargs, result))
            return result

        cli.run_estimate = recording
        sys.argv = ["memory_estimator", *flags, "--pp-rank", str(pp_rank)]
        text = io.StringIO()
        try:
            with contextlib.redirect_stdout(text):
                cli.main()
        except SystemExit as stop:
            if stop.code not in (0, None):
                sys.exit(EXIT_ESTIMATOR_FAILED)
        finally:
            cli.run_estimate = original
        stop_if_torch(guard)
        if len(calls) != 1:
            interface_changed(f"main() called run_estimate {len(calls)} times for one pp rank")
        kwargs, result = calls[0]
        try:
            out.append(describe(pp_rank, kwargs, result, text.getvalue()))
        except (AttributeError, KeyError, TypeError, IndexError) as err:
            interface_changed(f"{type(err).__name__}: {err}")
    print(MARKER + json.dumps({"driver_version": DRIVER_VERSION, "ranks": out}))


def main():
    mode, tree = sys.argv[1], sys.argv[2]
    sys.path.insert(0, tree)
    guard = TorchGuard()
    sys.meta_path.insert(0, guard)
    try:
        if mode == "json":
            ranks = [int(r) for r in sys.argv[3].split(",")]
            run_json(ranks, sys.argv[4:], guard)
        else:
            sys.argv = ["memory_estimator", *sys.argv[3:]]
            runpy.run_module("tools.memory_estimator", run_name="__main__", alter_sys=True)
            stop_if_torch(guard)
    except SystemExit:
        raise
    except BaseException:
        stop_if_torch(guard)
        traceback.print_exc()
        sys.exit(EXIT_ESTIMATOR_FAILED)


main()
