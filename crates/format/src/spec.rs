//! The shapes themselves: every line the instrumentation prints, in the skill's group order.
//!
//! A line that a helper prints is written here the way the helper prints it: the `[rank=R]   `
//! and `: alloc=X` that `_lmem` puts around its label ([`probe!`]), the `setup_model | LABEL: `
//! of `_setup_mem` ([`setup!`]), the `| alloc=… cached=… non-pt=…` that `_mem_detail()` returns
//! ([`detail!`]), the saved-tensor lines `print_summary` prints.

use crate::{Field, Kind, Shape, Unit};

/// `_mem_detail()` and the tail of `_setup_mem` and the checkpoint print.
macro_rules! detail {
    () => {
        "alloc={alloc:.2f} cached={cached:.2f} non-pt={non_pt:.2f}"
    };
}

/// A DualPipeV print: `[rank=R pp=P] LABEL: X GiB … | DETAIL`.
macro_rules! pipeline {
    ($body:literal) => {
        concat!("[rank={rank} pp={pp}] ", $body, " | ", detail!())
    };
}

/// What `_lmem(LABEL)` prints.
macro_rules! probe {
    ($label:literal) => {
        concat!("[rank={rank}]   ", $label, ": alloc={alloc:.2f}")
    };
}

/// What `_setup_mem(LABEL)` prints.
macro_rules! setup {
    ($label:literal) => {
        concat!("[rank={rank}] setup_model | ", $label, ": ", detail!())
    };
}

const RANK: Field = Field::new(
    "rank",
    Unit::Index,
    "the global rank that printed (`torch.distributed.get_rank()`)",
);
const PP: Field = Field::new("pp", Unit::Index, "the pipeline stage of the rank");
const I: Field = Field::new("i", Unit::Index, "the index of the step's loop");
const ITERATIONS: Field = Field::new("count", Unit::Count, "how many times the step's loop ran");
const ALLOCATED: Field = Field::new(
    "allocated",
    Unit::GiB,
    "`torch.cuda.memory_allocated()` at the print (`_mem_gb()`)",
);
const SINCE_START: Field = Field::new(
    "delta",
    Unit::GiB,
    "allocated now minus allocated at `Before pipeline` (printed `+-0.05` when negative)",
);
const SINCE_BEFORE_B1: Field = Field::new(
    "delta",
    Unit::GiB,
    "allocated now minus allocated at this iteration's `before B1`, signed",
);
const ALLOC: Field = Field::new("alloc", Unit::GiB, "`torch.cuda.memory_allocated()`");
const CACHED: Field = Field::new(
    "cached",
    Unit::GiB,
    "reserved by PyTorch's caching allocator but not allocated",
);
const NON_PT: Field = Field::new(
    "non_pt",
    Unit::GiB,
    "device memory in use outside PyTorch: CUDA context, NCCL buffers",
);
const CUDA_CTX: Field = Field::new(
    "cuda_ctx",
    Unit::GiB,
    "device memory in use before `init_process_group` (the CUDA context)",
);
const AFTER_NCCL_WORLD: Field = Field::new(
    "after_nccl_world",
    Unit::GiB,
    "device memory in use after `init_process_group`",
);
const NCCL_WORLD_COST: Field = Field::new(
    "nccl_world_cost",
    Unit::GiB,
    "what `init_process_group` added (NCCL's world communicator)",
);
const GPU_TOTAL: Field = Field::new(
    "gpu_total",
    Unit::GiB,
    "the GPU's total memory (`torch.cuda.mem_get_info()`'s total), rounded for people",
);
const GPU_TOTAL_BYTES: Field = Field::new(
    "gpu_total_bytes",
    Unit::Bytes,
    "the GPU's total memory (`torch.cuda.mem_get_info()`'s total), exact: the capacity a report sets the peak against",
);
const MESH_NON_PT: Field = Field::new(
    "non_pt",
    Unit::GiB,
    "device memory in use after `init_device_mesh`",
);
const MESH_COST: Field = Field::new(
    "mesh_cost",
    Unit::GiB,
    "what `init_device_mesh` added (the mesh's communicators)",
);
const OPTIMIZER_STATE: Field = Field::new(
    "optimizer_state",
    Unit::GiB,
    "the bytes of the optimizers' state tensors (a DTensor's local shard)",
);
const PARAM_ENTRIES: Field = Field::new(
    "param_entries",
    Unit::Count,
    "the parameters with optimizer state",
);
const LAYER: Field = Field::new(
    "layer",
    Unit::Index,
    "the decoder layer's index (`layer.idx`)",
);
const SHAPE: Field = Field::new(
    "shape",
    Unit::Text,
    "a tensor's shape as Python prints a tuple: `(16384, 2048)`",
);
const TENSOR: Field = Field::new(
    "tensor",
    Unit::Text,
    "the name the model gives the tensor, written in when `add` runs",
);
const OPERATION: Field = Field::new(
    "operation",
    Unit::Text,
    "what an experts step calls (`gate_proj`), padded to 11 columns when `add` runs",
);
const SHAPES_FIELD: Field = Field::new(
    "shapes",
    Unit::Text,
    "the tensors an experts step produced, `name=(shape)`, space-separated",
);
const STAGE: Field = Field::new(
    "stage",
    Unit::Text,
    "the stage: `stage1`, `stage3` or `stage5`",
);
const TAG: Field = Field::new(
    "tag",
    Unit::Text,
    "`weight` for a tensor sharing a parameter's storage, else `activ`",
);
const DTYPE: Field = Field::new("dtype", Unit::Text, "the tensor's dtype: `torch.bfloat16`");
const TENSOR_MB: Field = Field::new("mb", Unit::MiB, "the tensor's size");
const TENSOR_BYTES: Field = Field::new("bytes", Unit::Bytes, "the tensor's size, exact");
const ACTIV_MB: Field = Field::new("activ_mb", Unit::MiB, "the saved activations' size");
const ACTIV_BYTES: Field = Field::new("activ", Unit::Bytes, "the saved activations' size, exact");
const WEIGHT_MB: Field = Field::new("weight_mb", Unit::MiB, "the saved weights' size");
const WEIGHT_BYTES: Field = Field::new("weight", Unit::Bytes, "the saved weights' size, exact");
const TENSORS: Field = Field::new("count", Unit::Count, "how many tensors the stage saved");
const DIR: Field = Field::new(
    "dir",
    Unit::Text,
    "the snapshot folder (`--snapshot-dir`), written in when `add` runs",
);
const STEP: Field = Field::new("step", Unit::Index, "the training step (`training.step`)");

const PIPELINE_AT: [Field; 6] = [RANK, PP, ALLOCATED, ALLOC, CACHED, NON_PT];
const PIPELINE_SINCE_START: [Field; 8] =
    [RANK, PP, I, ALLOCATED, SINCE_START, ALLOC, CACHED, NON_PT];
const PIPELINE_AFTER_STEP: [Field; 8] = [
    RANK,
    PP,
    ITERATIONS,
    ALLOCATED,
    SINCE_START,
    ALLOC,
    CACHED,
    NON_PT,
];
const PIPELINE_SINCE_B1: [Field; 8] = [
    RANK,
    PP,
    I,
    ALLOCATED,
    SINCE_BEFORE_B1,
    ALLOC,
    CACHED,
    NON_PT,
];

const SETUP_FIELDS: [Field; 4] = [RANK, ALLOC, CACHED, NON_PT];

/// A print as the current templates write it.
const fn shape(
    name: &'static str,
    kind: Kind,
    group: &'static str,
    text: &'static str,
    fields: &'static [Field],
) -> Shape {
    Shape {
        name,
        kind,
        group,
        text,
        fields,
        label: None,
        listed: None,
        legacy: false,
    }
}

impl Shape {
    const fn listed(self, listed: &'static str) -> Self {
        Shape {
            listed: Some(listed),
            ..self
        }
    }

    const fn label(self, label: &'static str) -> Self {
        Shape {
            label: Some(label),
            ..self
        }
    }

    const fn legacy(self) -> Self {
        Shape {
            legacy: true,
            ..self
        }
    }
}

use Kind::*;

/// A `_setup_mem(LABEL)` call of group 3.
macro_rules! setup_shape {
    ($name:literal, $label:literal) => {
        shape($name, Setup, "3", setup!($label), &SETUP_FIELDS)
            .label($label)
            .listed(concat!("setup_model | ", $label, ":"))
    };
}

/// An `_lmem(LABEL)` call.
macro_rules! probe_shape {
    ($name:literal, $group:literal, $label:literal, $fields:expr) => {
        shape($name, Probe, $group, probe!($label), $fields).label($label)
    };
}

const PROBE: [Field; 2] = [RANK, ALLOC];
const LAYER_PROBE: [Field; 3] = [RANK, LAYER, ALLOC];
const LAYER_SHAPE_PROBE: [Field; 4] = [RANK, LAYER, SHAPE, ALLOC];
const LAYER_TENSOR_PROBE: [Field; 5] = [RANK, LAYER, TENSOR, SHAPE, ALLOC];

/// Every print, in the skill's group order; within a group, in the order `add` lists them.
pub const SHAPES: &[Shape] = &[
    // Group 2: distributed.py.
    shape(
        "process_group",
        ProcessGroup,
        "2",
        "[rank={rank}] init_process_group | cuda_ctx={cuda_ctx:.2f} after_nccl_world={after_nccl_world:.2f} nccl_world_cost={nccl_world_cost:.2f} gpu_total={gpu_total:.2f} ({gpu_total_bytes} bytes)",
        &[
            RANK,
            CUDA_CTX,
            AFTER_NCCL_WORLD,
            NCCL_WORLD_COST,
            GPU_TOTAL,
            GPU_TOTAL_BYTES,
        ],
    )
    .listed("init_process_group | cuda_ctx= after_nccl_world= nccl_world_cost= gpu_total="),
    shape(
        "process_group_without_total",
        ProcessGroup,
        "2",
        "[rank={rank}] init_process_group | cuda_ctx={cuda_ctx:.2f} after_nccl_world={after_nccl_world:.2f} nccl_world_cost={nccl_world_cost:.2f}",
        &[RANK, CUDA_CTX, AFTER_NCCL_WORLD, NCCL_WORLD_COST],
    )
    .legacy(),
    shape(
        "device_mesh",
        DeviceMesh,
        "2",
        "[rank={rank}] init_device_mesh | non-pt={non_pt:.2f} mesh_cost={mesh_cost:.2f}",
        &[RANK, MESH_NON_PT, MESH_COST],
    )
    .listed("init_device_mesh | non-pt= mesh_cost="),
    // Group 3: training.py, through group 1C's `_setup_mem`.
    setup_shape!("setup_before_model_creation", "before model creation"),
    setup_shape!("setup_after_module0_creation", "after module[0] creation"),
    setup_shape!("setup_after_module1_creation", "after module[1] creation"),
    setup_shape!("setup_after_init_weights", "after init_weights"),
    setup_shape!("setup_after_apply_fsdp", "after apply_fsdp"),
    // Group 4: dualpipev.py, with group 1A's `_mem_detail()`. Named as the log reader names
    // the schedule points.
    shape(
        "before_pipeline",
        Pipeline,
        "4",
        pipeline!("Before pipeline: {allocated:.2f} GiB"),
        &PIPELINE_AT,
    )
    .listed("Before pipeline"),
    shape(
        "step1_f0",
        Pipeline,
        "4",
        pipeline!("Step1 F0 i={i}: {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_SINCE_START,
    )
    .listed("Step1 F0 i="),
    shape(
        "after_step1",
        Pipeline,
        "4",
        pipeline!("After Step1 ({count} F0): {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_AFTER_STEP,
    )
    .listed("After Step1"),
    shape(
        "step2_forward_chunk0",
        Pipeline,
        "4",
        pipeline!("Step2 i={i} forward_chunk(0): {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_SINCE_START,
    )
    .listed("Step2 i= forward_chunk(0|1)"),
    shape(
        "step2_forward_chunk1",
        Pipeline,
        "4",
        pipeline!("Step2 i={i} forward_chunk(1): {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_SINCE_START,
    )
    .listed("Step2 i= forward_chunk(0|1)"),
    shape(
        "after_step2",
        Pipeline,
        "4",
        pipeline!("After Step2 ({count} F0F1): {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_AFTER_STEP,
    )
    .listed("After Step2"),
    shape(
        "step3_before_b1",
        Pipeline,
        "4",
        pipeline!("Step3 i={i} before B1: {allocated:.2f} GiB"),
        &[RANK, PP, I, ALLOCATED, ALLOC, CACHED, NON_PT],
    )
    .listed("Step3 i= before B1/after B1/after W1/after F1"),
    shape(
        "step3_after_b1",
        Pipeline,
        "4",
        pipeline!("Step3 i={i} after B1: {allocated:.2f} GiB (delta={delta:+.2f})"),
        &PIPELINE_SINCE_B1,
    )
    .listed("Step3 i= before B1/after B1/after W1/after F1"),
    shape(
        "step3_after_w1",
        Pipeline,
        "4",
        pipeline!("Step3 i={i} after W1: {allocated:.2f} GiB (delta={delta:+.2f})"),
        &PIPELINE_SINCE_B1,
    )
    .listed("Step3 i= before B1/after B1/after W1/after F1"),
    shape(
        "step3_after_f1",
        Pipeline,
        "4",
        pipeline!("Step3 i={i} after F1: {allocated:.2f} GiB (delta={delta:+.2f})"),
        &PIPELINE_SINCE_B1,
    )
    .listed("Step3 i= before B1/after B1/after W1/after F1"),
    shape(
        "after_step3",
        Pipeline,
        "4",
        pipeline!("After Step3 ({count} B1W1F1): {allocated:.2f} GiB (+{delta:.2f})"),
        &PIPELINE_AFTER_STEP,
    )
    .listed("After Step3"),
    shape(
        "step4",
        Pipeline,
        "4",
        pipeline!("Step4 i={i}: {allocated:.2f} GiB"),
        &[RANK, PP, I, ALLOCATED, ALLOC, CACHED, NON_PT],
    )
    .listed("Step4 i="),
    shape(
        "after_step4",
        Pipeline,
        "4",
        pipeline!("After Step4 ({count} F0B1F1B0): {allocated:.2f} GiB"),
        &[RANK, PP, ITERATIONS, ALLOCATED, ALLOC, CACHED, NON_PT],
    )
    .listed("After Step4"),
    shape(
        "after_step8",
        Pipeline,
        "4",
        pipeline!("After Step8 (end of pipeline): {allocated:.2f} GiB"),
        &PIPELINE_AT,
    )
    .listed("After Step8 (end of pipeline)"),
    // Group 5A: execution.py's layer_forward, through group 1B's `_lmem` and
    // `_SavedTensorsProfiler.print_summary`.
    probe_shape!(
        "layer_after_stage1",
        "5A",
        "layer{layer} after stage1 (forward_stage1: attn + gate + dispatch_prep)",
        &LAYER_PROBE
    )
    .listed("layerN after stage1..5"),
    probe_shape!(
        "layer_after_stage2",
        "5A",
        "layer{layer} after stage2 (dispatch a2a)",
        &LAYER_PROBE
    )
    .listed("layerN after stage1..5"),
    probe_shape!(
        "layer_after_stage3",
        "5A",
        "layer{layer} after stage3 (forward_stage3)",
        &LAYER_PROBE
    )
    .listed("layerN after stage1..5"),
    probe_shape!(
        "layer_after_stage4",
        "5A",
        "layer{layer} after stage4 (combine a2a)",
        &LAYER_PROBE
    )
    .listed("layerN after stage1..5"),
    probe_shape!(
        "layer_after_stage5",
        "5A",
        "layer{layer} after stage5 (forward_stage5)",
        &LAYER_PROBE
    )
    .listed("layerN after stage1..5"),
    shape(
        "saved_header",
        SavedHeader,
        "5A",
        "[rank={rank}] layer{layer} {stage} saved tensors:",
        &[RANK, LAYER, STAGE],
    )
    .listed("layerN stageK saved tensors:"),
    shape(
        "saved_tensor",
        SavedTensor,
        "5A",
        "[rank={rank}]     saved ({tag}): {shape} {dtype} ({mb:.1f} MB, {bytes} bytes)",
        &[RANK, TAG, SHAPE, DTYPE, TENSOR_MB, TENSOR_BYTES],
    ),
    shape(
        "saved_summary",
        SavedSummary,
        "5A",
        "[rank={rank}]   activ={activ_mb:.1f} MB ({activ} bytes), weight={weight_mb:.1f} MB ({weight} bytes), total={count} tensors",
        &[RANK, ACTIV_MB, ACTIV_BYTES, WEIGHT_MB, WEIGHT_BYTES, TENSORS],
    ),
    shape(
        "saved_tensor_mb",
        SavedTensor,
        "5A",
        "[rank={rank}]     saved ({tag}): {shape} {dtype} ({mb:.1f} MB)",
        &[RANK, TAG, SHAPE, DTYPE, TENSOR_MB],
    )
    .legacy(),
    shape(
        "saved_summary_mb",
        SavedSummary,
        "5A",
        "[rank={rank}]   activ={activ_mb:.1f} MB, weight={weight_mb:.1f} MB, total={count} tensors",
        &[RANK, ACTIV_MB, WEIGHT_MB, TENSORS],
    )
    .legacy(),
    // Groups 5B-5E: the model file, through `_lmem`.
    probe_shape!(
        "stage1_before_compute",
        "5B-5E",
        "  layer{layer} stage1: before forward_stage1_compute",
        &LAYER_PROBE
    )
    .listed("layerN stage1: ..."),
    probe_shape!(
        "stage1_after_compute",
        "5B-5E",
        "  layer{layer} stage1: after forward_stage1_compute (LN+Attn+LN+gate)",
        &LAYER_PROBE
    )
    .listed("layerN stage1: ..."),
    probe_shape!(
        "stage1_after_compute_before_router",
        "5B-5E",
        "  layer{layer} stage1: after forward_stage1_compute (LN+Attn+LN)",
        &LAYER_PROBE
    )
    .listed("layerN stage1: ..."),
    probe_shape!(
        "stage1_after_router",
        "5B-5E",
        "  layer{layer} stage1: after router",
        &LAYER_PROBE
    )
    .listed("layerN stage1: ..."),
    probe_shape!(
        "stage1_after_dispatch",
        "5B-5E",
        "  layer{layer} stage1: after dispatch_prep  dispatch={shape}",
        &LAYER_SHAPE_PROBE
    )
    .listed("layerN stage1: ..."),
    probe_shape!(
        "stage3_before_gather",
        "5B-5E",
        "  layer{layer} stage3: before expand gather  gathered={shape}",
        &LAYER_SHAPE_PROBE
    )
    .listed("layerN stage3: ..."),
    probe_shape!(
        "stage3_after_gather",
        "5B-5E",
        "  layer{layer} stage3: after expand gather   expanded={shape}",
        &LAYER_SHAPE_PROBE
    )
    .listed("layerN stage3: ..."),
    probe_shape!(
        "stage3_after_scatter",
        "5B-5E",
        "  layer{layer} stage3: after scatter      {tensor}={shape}",
        &LAYER_TENSOR_PROBE
    )
    .listed("layerN stage3: ..."),
    probe_shape!(
        "stage3_after_experts",
        "5B-5E",
        "  layer{layer} stage3: after experts      {tensor}={shape}",
        &LAYER_TENSOR_PROBE
    )
    .listed("layerN stage3: ..."),
    probe_shape!(
        "stage3_after_unshuffle",
        "5B-5E",
        "  layer{layer} stage3: after unshuffle    outs={shape}",
        &LAYER_SHAPE_PROBE
    )
    .listed("layerN stage3: ..."),
    probe_shape!(
        "experts_input",
        "5B-5E",
        "    experts: input             {shapes}",
        &[RANK, SHAPES_FIELD, ALLOC]
    )
    .listed("experts: ..."),
    probe_shape!(
        "experts_step",
        "5B-5E",
        "    experts: after {operation} {shapes}",
        &[RANK, OPERATION, SHAPES_FIELD, ALLOC]
    )
    .listed("experts: ..."),
    probe_shape!(
        "experts_inner",
        "5B-5E",
        "    experts: after {operation} gu={shape}",
        &[RANK, OPERATION, SHAPE, ALLOC]
    )
    .listed("experts: ..."),
    probe_shape!(
        "experts_outer",
        "5B-5E",
        "    experts: after {operation} out={shape}",
        &[RANK, OPERATION, SHAPE, ALLOC]
    )
    .listed("experts: ..."),
    probe_shape!(
        "after_prolog",
        "5B-5E",
        "after prolog (embed_tokens)",
        &PROBE
    )
    .listed("after prolog"),
    probe_shape!(
        "before_epilog",
        "5B-5E",
        "before epilog (norm + lm_head)",
        &PROBE
    )
    .listed("before epilog / after norm / after lm_head"),
    probe_shape!(
        "after_norm",
        "5B-5E",
        "after norm, before lm_head",
        &PROBE
    )
    .listed("before epilog / after norm / after lm_head"),
    probe_shape!("after_lm_head", "5B-5E", "after lm_head", &PROBE)
        .listed("before epilog / after norm / after lm_head"),
    // Group 6: pretrain_lm.py's load_checkpoint.
    shape(
        "checkpoint_load",
        CheckpointLoad,
        "6",
        concat!(
            "[rank={rank}] load_ckpt | optimizer state: {optimizer_state:.2f} GiB ",
            "({param_entries} param entries) | ",
            detail!()
        ),
        &[RANK, OPTIMIZER_STATE, PARAM_ENTRIES, ALLOC, CACHED, NON_PT],
    )
    .listed("load_ckpt | optimizer state:"),
    // Group 7: pretrain_lm.py's train_step.
    shape(
        "snapshot_step",
        Snapshot,
        "7",
        "[rank={rank}] Memory snapshot saved to {dir}/memory_snapshot_rank{rank}_step{step}.pickle",
        &[RANK, DIR, STEP],
    )
    .label("{dir}/memory_snapshot_rank{rank}_step{step}.pickle")
    .listed("Memory snapshot saved to <dir>/memory_snapshot_rank<R>_step<S>.pickle"),
    shape(
        "snapshot_oom",
        Snapshot,
        "7",
        "[rank={rank}] Memory snapshot saved to {dir}/memory_snapshot_rank{rank}.pickle",
        &[RANK, DIR],
    )
    .label("{dir}/memory_snapshot_rank{rank}.pickle"),
];
