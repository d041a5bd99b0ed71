"""A stand-in for PithTrain's ``tools/memory_estimator/__main__.py`` that replays a recording.

memprints' tests copy this file into a temp tree as ``tools/memory_estimator/__main__.py``
with one of the driver outputs kept beside it in ``tests/data/estimate/`` as
``tools/memory_estimator/recorded.json``, so that ``memprints report --estimate`` runs its real
driver against a tree without PithTrain. ``main()`` parses the estimator's own flags, checks
that the run's settings reached it (pp size, batch sizes, sequence length and the model
config's ``model_type`` must be those of the recording), and calls ``run_estimate`` once, which
hands back objects shaped like the estimator's ``ScheduleResult`` rebuilt from the recording:
the driver reads them back into the very JSON that was recorded. Our own code, not PithTrain's.
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

RECORDED = Path(__file__).with_name("recorded.json")


def bucket(total, name="", specs=()):
    return SimpleNamespace(name=name, total_bytes=total, specs=list(specs))


def spec(name, size):
    return SimpleNamespace(name=name, bytes=size)


def snapshot(event, rank):
    return SimpleNamespace(
        static_bytes=event["static_bytes"],
        activation_bytes=event["activation_bytes"],
        autograd_bytes=event["autograd_bytes"],
        gradients=bucket(event["gradient_bytes"]),
        comm_buffers=bucket(event["comm_bytes"]),
        weight_grad_store=bucket(event["wgrad_store_bytes"]),
        pp_transfer_buffers=bucket(event["pp_transfer_bytes"]),
        fragmentation_bytes=event["fragmentation_bytes"],
        total_bytes=event["total_bytes"],
        activations={(p, c): bucket(size) for p, c, size in event["live"]},
        autograd_overhead={},
        non_pytorch_bytes=rank["non_pytorch_bytes"],
        fragmentation_factor=rank["fragmentation_factor"],
        params_unsharded=[
            bucket(p["bytes"], p["name"], [spec("rotary_emb.cos_sin", p["rotary_bytes"])])
            for p in rank["params"]
        ],
        fsdp_sharded_params=bucket(rank["fsdp_sharded_bytes"]),
        optimizer_states=bucket(rank["optimizer"]["bytes"], rank["optimizer"]["name"]),
    )


def attach_layer_parts(timeline, rank):
    """Puts the recorded per-part sizes where the driver looks for them: on the lowest live
    chunk of each phase in the first snapshot where that phase is live."""
    for phase in (0, 1):
        parts = [p for p in rank["layers"] if p["phase"] == phase]
        live = next(
            (e.snapshot for e in timeline if any(k[0] == phase for k in e.snapshot.activations)),
            None,
        )
        if not parts or live is None:
            continue
        key = min(k for k in live.activations if k[0] == phase)
        records, autograd = [], []
        for p in parts:
            if p["part"] == "layer":
                where = f"p{phase}.c{key[1]}.L{p['layer']}.s{p['stage']}."
            elif p["part"] in ("prolog", "epilog"):
                where = f"p{phase}.c{key[1]}.{p['part']}."
            else:
                where = "unmatched."
            records.append(spec(where + ("rec.topk" if p["moe"] else "rec"), p["records_bytes"]))
            autograd.append(spec(where + "ag", p["autograd_bytes"]))
        live.activations[key].specs = records
        live.autograd_overhead[key] = bucket(0, specs=autograd)


def run_estimate(**kwargs):
    rank = kwargs["recorded"]
    timeline = [
        SimpleNamespace(name=e["name"], snapshot=snapshot(e, rank)) for e in rank["timeline"]
    ]
    attach_layer_parts(timeline, rank)
    return SimpleNamespace(
        timeline=timeline,
        peak_event_idx=rank["peak_index"],
        peak_bytes=rank["peak_total_bytes"],
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--pp-size", type=int, required=True)
    parser.add_argument("--ep-size", type=int, default=1)
    parser.add_argument("--cp-size", type=int, default=1)
    parser.add_argument("--total-gpus", type=int, required=True)
    parser.add_argument("--micro-batch-size", type=int, required=True)
    parser.add_argument("--global-batch-size", type=int, required=True)
    parser.add_argument("--sequence-length", type=int, required=True)
    parser.add_argument("--pp-rank", type=int, default=0)
    parser.add_argument("--gpu-memory-gb", type=float, default=None)
    args, _ = parser.parse_known_args()
    recorded = json.loads(RECORDED.read_text())
    rank = next((r for r in recorded["ranks"] if r["pp_rank"] == args.pp_rank), None)
    if rank is None:
        print(f"Error: no recording for pp rank {args.pp_rank}", file=sys.stderr)
        sys.exit(1)
    par = rank["parallel"]
    model_type = json.loads(Path(args.model).read_text()).get("model_type")
    asked = (
        args.pp_size,
        args.micro_batch_size,
        args.global_batch_size,
        args.sequence_length,
        model_type,
    )
    want = (
        par["pp"],
        par["micro_batch_size"],
        par["global_batch_size"],
        par["sequence_length"],
        rank["model"]["model_type"],
    )
    if asked != want:
        print(f"Error: asked for {asked}, the recording is of {want}", file=sys.stderr)
        sys.exit(1)
    model = SimpleNamespace(**rank["model"])
    parallel = SimpleNamespace(
        pp_size=par["pp"],
        ep_size=par["ep"],
        dp_size=par["dp"],
        cp_size=par["cp"],
        micro_batch_size=par["micro_batch_size"],
        global_batch_size=par["global_batch_size"],
        sequence_length=par["sequence_length"],
    )
    # A capacity given is judged as the estimator does: OOM over it, TIGHT under 5 % free.
    status = rank["status"]
    gpu_memory_gb = rank["gpu_memory_bytes"] / 1024**3
    if args.gpu_memory_gb is not None:
        gpu_memory_gb = args.gpu_memory_gb
        free = gpu_memory_gb * 1024**3 - rank["peak_total_bytes"]
        status = "OOM" if free < 0 else "TIGHT" if free < 0.05 * gpu_memory_gb * 1024**3 else "OK"
    run_estimate(
        model_cfg=model,
        parallel_cfg=parallel,
        gpu_memory_gb=gpu_memory_gb,
        recorded=rank,
    )
    if status:
        print(f"STATUS: {status}")


if __name__ == "__main__":
    main()
