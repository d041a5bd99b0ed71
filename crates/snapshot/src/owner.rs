//! Who owns an allocation: the library or the model code whose frame allocated it, read off
//! its stack. The HTML timeline colours memory by owner (as PyTorch's `memory_viz` colours
//! each allocation by its stack, but in a handful of bands one can name), and the diff page
//! compares the owners' bytes at each peak.
//!
//! The rule, walking the stack innermost first: the first frame that belongs to a known
//! library names the owner ([`LIBRARIES`]: cuBLAS's workspace, Triton and Inductor, FSDP's
//! collectives, NCCL, the optimizer), and so does the first frame in `pithtrain/`, by its file
//! (`pithtrain/models/qwen3_moe.py`): what is inside the model code's call wins over what is
//! outside it. A stack with none of these is owned by its innermost Python file outside
//! PyTorch and the standard library, else by [`PYTORCH`] when it has Python frames at all, by
//! [`NATIVE`] when it has only native ones, and by [`NO_STACK`] when it is empty.
//!
//! Contract: [`owner`] is a pure function of `(file, function)` pairs; its names are short
//! enough for a legend. The list is deliberately small and data-driven: refine it by adding a
//! row to [`LIBRARIES`] and a test below.

use std::borrow::Cow;

use super::analyze::{self, DeviceReport, StackGroup};

/// Memory live before the trace began: its stack was never recorded.
pub const BEFORE_TRACE: &str = "allocated before the trace";
/// A block recorded without any frame.
pub const NO_STACK: &str = "no stack recorded";
/// Python frames, all of them PyTorch's or the standard library's.
pub const PYTORCH: &str = "PyTorch (no model frame)";
/// Only native frames (the autograd engine's thread, C++ extensions).
pub const NATIVE: &str = "native code (no Python frame)";

/// Where a frame is matched: its function name or its file.
#[derive(Debug, Clone, Copy)]
enum In {
    Function,
    File,
}

/// A library owner: its name and the substrings that recognise one of its frames.
pub struct Library {
    /// As the legend says it.
    pub name: &'static str,
    patterns: &'static [(In, &'static str)],
}

/// The libraries recognised, tried in this order on each frame.
pub const LIBRARIES: [Library; 5] = [
    Library {
        name: "cuBLAS/cuBLASLt workspace",
        patterns: &[
            (In::Function, "setWorkspaceForHandle"),
            (In::Function, "getCurrentCUDABlasHandle"),
            (In::Function, "getCUDABlasLtWorkspace"),
            (In::Function, "cublas"),
        ],
    },
    Library {
        name: "Triton/Inductor autotuning",
        patterns: &[(In::File, "triton/"), (In::File, "torch/_inductor/")],
    },
    Library {
        name: "FSDP all-gather/reduce-scatter",
        patterns: &[
            (In::File, "distributed/fsdp/"),
            (In::File, "_composable/fsdp/"),
        ],
    },
    Library {
        name: "NCCL",
        patterns: &[
            (In::Function, "NCCL"),
            (In::Function, "nccl"),
            (In::File, "distributed_c10d.py"),
        ],
    },
    Library {
        name: "optimizer",
        patterns: &[(In::File, "torch/optim/")],
    },
];

/// The owner of a stack given as `(file, function)` pairs, innermost first.
pub fn owner<'a>(frames: impl IntoIterator<Item = (&'a str, &'a str)>) -> Cow<'static, str> {
    let mut any = false;
    let mut python = false;
    let mut outside_torch: Option<&'a str> = None;
    for (file, function) in frames {
        any = true;
        if let Some(lib) = LIBRARIES.iter().find(|lib| {
            lib.patterns.iter().any(|(at, p)| match at {
                In::Function => function.contains(p),
                In::File => file.contains(p),
            })
        }) {
            return Cow::Borrowed(lib.name);
        }
        if let Some(i) = file.rfind("pithtrain/") {
            return Cow::Owned(file[i..].to_owned());
        }
        python |= analyze::is_python(file);
        if outside_torch.is_none() && !analyze::is_internal(file) {
            outside_torch = Some(file);
        }
    }
    match outside_torch {
        Some(file) => Cow::Owned(analyze::short_path(file).to_owned()),
        None if python => Cow::Borrowed(PYTORCH),
        None if any => Cow::Borrowed(NATIVE),
        None => Cow::Borrowed(NO_STACK),
    }
}

/// The owner of a peak group, from its formatted stack (`path:line function`, see
/// [`analyze::format_frame`]); the groups of blocks without a stack keep their own name.
pub fn owner_of_group(g: &StackGroup) -> Cow<'static, str> {
    if g.frame == analyze::BEFORE_TRACE {
        return Cow::Borrowed(BEFORE_TRACE);
    }
    owner(g.stack.iter().map(|f| {
        let (place, function) = f.split_once(' ').unwrap_or((f.as_str(), ""));
        let file = place.rsplit_once(':').map_or(place, |(file, _)| file);
        (file, function)
    }))
}

/// Bytes live at the device's peak per owner, largest first (then by name).
pub fn owners_at_peak(d: &DeviceReport) -> Vec<(String, u64)> {
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    for g in &d.peak_stacks {
        *by.entry(owner_of_group(g).into_owned()).or_default() += g.bytes;
    }
    let mut out: Vec<(String, u64)> = by.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
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

    #[test]
    fn cublas_workspace_is_owned_by_cublas_whatever_model_line_ran_the_matmul() {
        let stack = [
            ("??", "at::cuda::getCurrentCUDABlasHandle()"),
            ("torch/lib/libtorch_cuda.so", "at::cuda::blas::gemm"),
            MODEL,
        ];
        assert_eq!(of(&stack), "cuBLAS/cuBLASLt workspace");
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
    }

    #[test]
    fn a_library_inside_the_model_call_owns_what_it_allocates() {
        let fsdp = (
            "/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_param.py",
            "alloc_storage",
        );
        assert_eq!(of(&[fsdp, MODEL]), "FSDP all-gather/reduce-scatter");
        let c10d = (
            "/site-packages/torch/distributed/distributed_c10d.py",
            "all_to_all_single",
        );
        assert_eq!(of(&[c10d, MODEL]), "NCCL");
        let nccl = ("libtorch_cuda.so", "c10d::ProcessGroupNCCL::allreduce");
        assert_eq!(of(&[nccl]), "NCCL");
        let adam = ("/site-packages/torch/optim/adamw.py", "_multi_tensor_adamw");
        assert_eq!(of(&[adam, ("train.py", "main")]), "optimizer");
        let tune = ("/site-packages/triton/testing.py", "do_bench");
        assert_eq!(of(&[tune, MODEL]), "Triton/Inductor autotuning");
        let inductor = (
            "/site-packages/torch/_inductor/select_algorithm.py",
            "benchmark",
        );
        assert_eq!(of(&[inductor]), "Triton/Inductor autotuning");
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
    }

    #[test]
    fn a_groups_owner_is_read_from_its_formatted_stack() {
        let g = |frame: &str, stack: &[&str]| StackGroup {
            frame: frame.into(),
            bytes: 1,
            count: 1,
            stack: stack.iter().map(|s| s.to_string()).collect(),
            key_frame: None,
        };
        let model = g(
            "pithtrain/models/qwen3_moe.py:267 forward_stage3",
            &[
                "torch/nn/modules/module.py:1 _call_impl",
                "pithtrain/models/qwen3_moe.py:267 forward_stage3",
            ],
        );
        assert_eq!(owner_of_group(&model), "pithtrain/models/qwen3_moe.py");
        let blas = g(
            "<cuBLAS workspace> at::cuda::getCurrentCUDABlasHandle()",
            &["??:0 at::cuda::getCurrentCUDABlasHandle()"],
        );
        assert_eq!(owner_of_group(&blas), "cuBLAS/cuBLASLt workspace");
        assert_eq!(owner_of_group(&g(analyze::BEFORE_TRACE, &[])), BEFORE_TRACE);
        assert_eq!(owner_of_group(&g(analyze::NO_STACK, &[])), NO_STACK);
    }
}
