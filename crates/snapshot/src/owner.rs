//! Who owns an allocation: the library or the model code whose frame allocated it, read off
//! its whole stack, and which model line asked for it. The HTML timeline colours memory by
//! owner (as PyTorch's `memory_viz` colours each allocation by its stack, but in a handful of
//! bands one can name), the stack tables name each group by its owner, with the model line as
//! "asked for by", and `report` sets the owners at a snapshot's peak beside the prints. This
//! module is the one place that knows what a stack's frames say about its owner.
//!
//! The rule, walking the stack innermost first: the first frame that belongs to a known
//! library names the owner ([`LIBRARIES`]: cuBLAS's workspace, Triton's and Inductor's
//! autotuning, FSDP's all-gather and reduce-scatter buffers and its unsharded gradients, NCCL,
//! the optimizer), refined by the library's other frames further out (FSDP's `_fsdp_collectives`
//! `allocate` serves both collectives; `foreach_reduce` further out says which), and so does
//! the first frame in `pithtrain/`, by its file (`pithtrain/models/qwen3_moe.py`): what is
//! inside the model code's call wins over what is outside it. A stack with none of these is
//! owned by its innermost Python file outside PyTorch and the standard library, else by
//! [`PYTORCH`] when it has Python frames at all, by [`NATIVE`] when it has only native ones,
//! and by [`NO_STACK`] when it is empty. Each owner has a [`Kind`], which `report` adds up by.
//!
//! Frames that only pass a call through are no owner: Inductor's compiled code (`output_code`,
//! its generated `call` in the cache folder) and Triton's launcher run what the model asked
//! for, so their buffers are the model line's; only benchmarking and autotuning frames own.
//!
//! Contract: [`owner`] and [`classify`] are pure functions of `(file, function)` pairs; the
//! names are short enough for a legend. The list is deliberately small and data-driven (every
//! row seen on a real stack or named by the library's source): refine it by adding a row to
//! [`LIBRARIES`] and a test below.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Serialize;

use super::frames;

/// Memory live before the trace began: its stack was never recorded.
pub const BEFORE_TRACE: &str = "allocated before the trace";
/// A block recorded without any frame.
pub const NO_STACK: &str = "no stack recorded";
/// Python frames, all of them PyTorch's or the standard library's.
pub const PYTORCH: &str = "PyTorch (no model frame)";
/// Only native frames (the autograd engine's thread, C++ extensions).
pub const NATIVE: &str = "native code (no Python frame)";
/// Reserved by the caching allocator and not allocated: `reserved - allocated`.
pub const UNUSED_RESERVE: &str = "allocator's unused reserve";
/// cuBLAS's and cuBLASLt's workspaces, one per handle and stream, kept for the process.
pub const CUBLAS_WORKSPACE: &str = "cuBLAS/cuBLASLt workspace";
/// Buffers of Triton's or Inductor's benchmarking of kernel configurations.
pub const AUTOTUNING: &str = "Triton/Inductor autotuning";
/// FSDP's all-gather inputs and outputs: the unsharded (and cast) weights.
pub const FSDP_ALL_GATHER: &str = "FSDP all-gather (unsharded weights)";
/// FSDP's reduce-scatter inputs and outputs.
pub const FSDP_REDUCE_SCATTER: &str = "FSDP reduce-scatter buffers";
/// FSDP's unsharded gradients accumulated in the reduce dtype between micro-batches.
pub const FSDP_GRADIENTS: &str = "FSDP unsharded gradients (accumulation)";

/// What an owner's bytes are, for adding them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Model code (or other Python code) asked for it: activations, their gradients and
    /// temporaries.
    Model,
    /// A library's buffer (a workspace, autotuning, a collective's buffer), named by what it is.
    Buffer,
    /// Gradients a library keeps (FSDP's unsharded accumulation).
    Gradients,
    /// The optimizer's state and temporaries.
    Optimizer,
    /// Live before the trace, or recorded without a stack: weights, and whatever came first.
    Unknown,
}

/// Where a frame is matched: its function name, its file, or both.
#[derive(Debug, Clone, Copy)]
enum In {
    Function(&'static str),
    File(&'static str),
    FileAndFunction(&'static str, &'static str),
}

impl In {
    fn matches(self, file: &str, function: &str) -> bool {
        match self {
            In::Function(p) => function.contains(p),
            In::File(p) => file.contains(p),
            In::FileAndFunction(f, p) => file.contains(f) && function.contains(p),
        }
    }
}

/// A library owner: its name, its kind, the patterns that recognise one of its frames, and
/// finer names chosen by a function among the library's frames from the first one outward.
pub struct Library {
    /// As the legend says it.
    pub name: &'static str,
    /// What its bytes are.
    pub kind: Kind,
    patterns: &'static [In],
    refine: &'static [(In, &'static str, Kind)],
}

/// The libraries recognised, tried in this order on each frame.
pub const LIBRARIES: [Library; 6] = [
    Library {
        name: CUBLAS_WORKSPACE,
        kind: Kind::Buffer,
        patterns: &[
            In::Function("setWorkspaceForHandle"),
            In::Function("getCurrentCUDABlasHandle"),
            In::Function("getCUDABlasLtWorkspace"),
            In::Function("cublas"),
        ],
        refine: &[],
    },
    Library {
        name: AUTOTUNING,
        kind: Kind::Buffer,
        patterns: &[
            In::File("triton/testing.py"),
            In::File("triton/runtime/autotuner.py"),
            In::FileAndFunction("triton/", "do_bench"),
            In::FileAndFunction("triton/", "get_empty_cache_for_benchmark"),
            In::File("torch/_inductor/select_algorithm.py"),
            In::File("torch/_inductor/autotune_process.py"),
            In::File("torch/_inductor/runtime/benchmarking.py"),
            In::FileAndFunction("torch/_inductor/", "autotune"),
            In::FileAndFunction("torch/_inductor/", "benchmark"),
            In::FileAndFunction("torch/_inductor/", "bench"),
        ],
        refine: &[],
    },
    Library {
        name: "FSDP buffers",
        kind: Kind::Buffer,
        patterns: &[In::File("distributed/fsdp/"), In::File("_composable/fsdp/")],
        refine: &[
            (
                In::Function("accumulated_grad"),
                FSDP_GRADIENTS,
                Kind::Gradients,
            ),
            (
                In::Function("accumulate_unsharded_grad"),
                FSDP_GRADIENTS,
                Kind::Gradients,
            ),
            (
                In::Function("foreach_reduce"),
                FSDP_REDUCE_SCATTER,
                Kind::Buffer,
            ),
            (
                In::Function("reduce_scatter"),
                FSDP_REDUCE_SCATTER,
                Kind::Buffer,
            ),
            (In::Function("all_gather"), FSDP_ALL_GATHER, Kind::Buffer),
            (In::Function("alloc_storage"), FSDP_ALL_GATHER, Kind::Buffer),
            (In::Function("unshard"), FSDP_ALL_GATHER, Kind::Buffer),
        ],
    },
    Library {
        name: "Triton kernel scratch",
        kind: Kind::Buffer,
        patterns: &[In::File("triton/runtime/_allocation.py")],
        refine: &[],
    },
    Library {
        name: "NCCL",
        kind: Kind::Buffer,
        patterns: &[
            In::Function("NCCL"),
            In::Function("nccl"),
            In::File("distributed_c10d.py"),
        ],
        refine: &[],
    },
    Library {
        name: "optimizer",
        kind: Kind::Optimizer,
        patterns: &[In::File("torch/optim/")],
        refine: &[],
    },
];

/// The owner of a stack and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// The owner ([`owner`]).
    pub owner: Cow<'static, str>,
    /// What its bytes are.
    pub kind: Kind,
}

/// The owner of a stack given as `(file, function)` pairs, innermost first.
pub fn owner<'a>(frames: impl IntoIterator<Item = (&'a str, &'a str)>) -> Cow<'static, str> {
    classify(frames).owner
}

/// The owner of a stack given as `(file, function)` pairs, innermost first, with its kind.
pub fn classify<'a>(frames: impl IntoIterator<Item = (&'a str, &'a str)>) -> Owned {
    let frames: Vec<(&'a str, &'a str)> = frames.into_iter().collect();
    let mut python = false;
    let mut outside_torch: Option<&'a str> = None;
    for (i, &(file, function)) in frames.iter().enumerate() {
        if let Some(lib) = LIBRARIES
            .iter()
            .find(|lib| lib.patterns.iter().any(|p| p.matches(file, function)))
        {
            return refined(lib, &frames[i..]);
        }
        if let Some(i) = file.rfind("pithtrain/") {
            return Owned {
                owner: Cow::Owned(file[i..].to_owned()),
                kind: Kind::Model,
            };
        }
        python |= frames::is_python(file);
        if outside_torch.is_none() && !frames::is_internal(file) {
            outside_torch = Some(file);
        }
    }
    let (owner, kind) = match outside_torch {
        Some(file) => (Cow::Owned(frames::short_path(file).to_owned()), Kind::Model),
        None if python => (Cow::Borrowed(PYTORCH), Kind::Model),
        None if !frames.is_empty() => (Cow::Borrowed(NATIVE), Kind::Model),
        None => (Cow::Borrowed(NO_STACK), Kind::Unknown),
    };
    Owned { owner, kind }
}

/// `lib`'s finer name from its frames in `outward` (the first one and those further out).
fn refined(lib: &Library, outward: &[(&str, &str)]) -> Owned {
    let own = outward
        .iter()
        .filter(|(file, function)| lib.patterns.iter().any(|p| p.matches(file, function)))
        .find_map(|(file, function)| {
            lib.refine
                .iter()
                .find(|(p, _, _)| p.matches(file, function))
        });
    match own {
        Some(&(_, name, kind)) => Owned {
            owner: Cow::Borrowed(name),
            kind,
        },
        None => Owned {
            owner: Cow::Borrowed(lib.name),
            kind: lib.kind,
        },
    }
}

/// The kind of an owner name as [`classify`] gives it: for tests, which name owners by name.
#[cfg(test)]
pub fn kind_of(owner: &str) -> Kind {
    if let Some(lib) = LIBRARIES.iter().find(|lib| lib.name == owner) {
        return lib.kind;
    }
    if let Some(&(_, _, kind)) = LIBRARIES
        .iter()
        .flat_map(|lib| lib.refine)
        .find(|(_, name, _)| *name == owner)
    {
        return kind;
    }
    match owner {
        BEFORE_TRACE | NO_STACK => Kind::Unknown,
        _ => Kind::Model,
    }
}

/// Bytes live at a peak under one owner.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct OwnerBytes {
    /// The owner ([`classify`]), or [`BEFORE_TRACE`].
    pub owner: String,
    /// What its bytes are.
    pub kind: Kind,
    /// Its bytes.
    pub bytes: u64,
    /// Its blocks.
    pub count: u64,
    /// The key frame (`path:line function`) of its largest group whose key frame is a model
    /// line, else of its largest group: the line that asked for the most of it.
    pub asked_by: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(frames: &[(&str, &str)]) -> String {
        owner(frames.iter().copied()).into_owned()
    }

    const MODEL: (&str, &str) = (
        "/work/PithTrain/pithtrain/models/qwen3_moe.py",
        "forward_stage3",
    );
    const MODULE: (&str, &str) = (
        "/usr/lib/python3.12/site-packages/torch/nn/modules/module.py",
        "_call_impl",
    );
    const FSDP: &str = "/site-packages/torch/distributed/fsdp/_fully_shard/";

    #[test]
    fn cublas_workspace_is_owned_by_cublas_whatever_model_line_ran_the_matmul() {
        let stack = [
            ("??", "at::cuda::getCurrentCUDABlasHandle()"),
            ("torch/lib/libtorch_cuda.so", "at::cuda::blas::gemm"),
            MODEL,
        ];
        assert_eq!(of(&stack), CUBLAS_WORKSPACE);
        assert_eq!(classify(stack).kind, Kind::Buffer);
    }

    #[test]
    fn model_code_is_owned_by_its_innermost_pithtrain_file() {
        let stack = [
            ("torch/lib/libtorch_cpu.so", "at::empty"),
            MODULE,
            ("/w/pithtrain/operators/grouped_linear.py", "forward"),
            MODEL,
        ];
        assert_eq!(of(&stack), "pithtrain/operators/grouped_linear.py");
        assert_eq!(classify(stack).kind, Kind::Model);
    }

    #[test]
    fn a_library_inside_the_model_call_owns_what_it_allocates() {
        let c10d = (
            "/site-packages/torch/distributed/distributed_c10d.py",
            "all_to_all_single",
        );
        assert_eq!(of(&[c10d, MODEL]), "NCCL");
        let nccl = ("libtorch_cuda.so", "c10d::ProcessGroupNCCL::allreduce");
        assert_eq!(of(&[nccl]), "NCCL");
        let adam = ("/site-packages/torch/optim/adamw.py", "_multi_tensor_adamw");
        assert_eq!(of(&[adam, ("train.py", "main")]), "optimizer");
        assert_eq!(classify([adam]).kind, Kind::Optimizer);
    }

    /// The FSDP stacks of the kept real snapshots (tests/data/e2e), innermost FSDP frames
    /// first: each is named by what the buffer is, not by the model line that ran the hook.
    #[test]
    fn fsdp_buffers_are_named_by_what_they_hold() {
        let file = |f: &str| format!("{FSDP}{f}");
        let (param, common, collectives, group) = (
            file("_fsdp_param.py"),
            file("_fsdp_common.py"),
            file("_fsdp_collectives.py"),
            file("_fsdp_param_group.py"),
        );
        let run_backward = ("/w/pithtrain/dualpipe/utils.py", "run_backward");
        let post = ("/w/pithtrain/dualpipe/dualpipev.py", "run_post_backward");
        let grads = [
            (param.as_str(), "to_accumulated_grad_if_needed"),
            (group.as_str(), "post_backward"),
            (group.as_str(), "backward"),
            run_backward,
        ];
        assert_eq!(of(&grads), FSDP_GRADIENTS);
        assert_eq!(classify(grads).kind, Kind::Gradients);
        let reduce = [
            (collectives.as_str(), "allocate"),
            (collectives.as_str(), "foreach_reduce"),
            (group.as_str(), "post_backward"),
            post,
        ];
        assert_eq!(of(&reduce), FSDP_REDUCE_SCATTER);
        let chunk = [
            (collectives.as_str(), "chunk_cat"),
            (collectives.as_str(), "foreach_reduce"),
            post,
        ];
        assert_eq!(of(&chunk), FSDP_REDUCE_SCATTER);
        let cast = [
            (common.as_str(), "_to_dtype_if_needed"),
            (param.as_str(), "all_gather_inputs"),
            (group.as_str(), "wait_for_unshard"),
            MODEL,
        ];
        assert_eq!(of(&cast), FSDP_ALL_GATHER);
        let outputs = [
            (param.as_str(), "init_all_gather_outputs"),
            (group.as_str(), "wait_for_unshard"),
            (group.as_str(), "pre_forward"),
            MODEL,
        ];
        assert_eq!(of(&outputs), FSDP_ALL_GATHER);
        let regather = [
            (param.as_str(), "alloc_storage"),
            (group.as_str(), "wait_for_unshard"),
            (group.as_str(), "pre_backward"),
        ];
        assert_eq!(of(&regather), FSDP_ALL_GATHER);
        assert_eq!(of(&[(param.as_str(), "something_new")]), "FSDP buffers");
        assert_eq!(kind_of(FSDP_GRADIENTS), Kind::Gradients);
        assert_eq!(kind_of(FSDP_ALL_GATHER), Kind::Buffer);
    }

    /// A Triton kernel autotuned on its first call from model code (`_gdr_bwd`): the 256 MiB
    /// buffer `do_bench` clears the L2 cache with is the autotuner's, not the model line's;
    /// Inductor's benchmarking of templates likewise.
    #[test]
    fn autotuning_buffers_are_owned_by_the_autotuner_not_the_model_line() {
        let gdr = ("/w/pithtrain/operators/gated_delta_rule.py", "_gdr_bwd");
        let tune = [
            (
                "/site-packages/triton/backends/nvidia/driver.py",
                "get_empty_cache_for_benchmark",
            ),
            ("/site-packages/triton/testing.py", "do_bench"),
            ("/site-packages/triton/runtime/autotuner.py", "_bench"),
            ("/site-packages/triton/runtime/autotuner.py", "run"),
            ("/site-packages/triton/runtime/jit.py", "<lambda>"),
            gdr,
        ];
        assert_eq!(of(&tune), AUTOTUNING);
        let inductor = (
            "/site-packages/torch/_inductor/select_algorithm.py",
            "benchmark_example_value",
        );
        assert_eq!(of(&[inductor, MODEL]), AUTOTUNING);
        let heuristics = (
            "/site-packages/torch/_inductor/runtime/triton_heuristics.py",
            "autotune_to_one_config",
        );
        assert_eq!(of(&[heuristics, MODEL]), AUTOTUNING);
        assert_eq!(kind_of(AUTOTUNING), Kind::Buffer);
    }

    /// Compiled code runs what the model asked for: the generated `call` in Inductor's cache
    /// folder and its runtime wrappers pass the call through, as Triton's launcher does.
    #[test]
    fn compiled_code_and_kernel_launches_are_the_model_lines() {
        let compiled = [
            ("/tmp/torchinductor_u/k3/ck37xdgsh.py", "call"),
            ("/site-packages/torch/_inductor/output_code.py", "__call__"),
            ("/site-packages/torch/_inductor/utils.py", "run"),
            MODEL,
        ];
        assert_eq!(of(&compiled), "pithtrain/models/qwen3_moe.py");
        let launch = [("/site-packages/triton/runtime/jit.py", "run"), MODEL];
        assert_eq!(of(&launch), "pithtrain/models/qwen3_moe.py");
    }

    #[test]
    fn a_library_outside_the_model_call_does_not() {
        let fsdp = (
            "/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_state.py",
            "_pre_forward",
        );
        assert_eq!(of(&[MODEL, fsdp]), "pithtrain/models/qwen3_moe.py");
    }

    #[test]
    fn stacks_without_model_or_library_frames_fall_back_in_order() {
        let script = ("/home/me/train.py", "main");
        assert_eq!(of(&[MODULE, script]), "/home/me/train.py");
        assert_eq!(of(&[MODULE]), PYTORCH);
        assert_eq!(of(&[("libtorch_cpu.so", "at::empty")]), NATIVE);
        assert_eq!(of(&[]), NO_STACK);
        assert_eq!(classify([]).kind, Kind::Unknown);
        assert_eq!(kind_of(BEFORE_TRACE), Kind::Unknown);
    }
}
