//! The parts of a memory breakdown as the report shows them: their display names in stacking
//! order, and each part's bytes (`None` for a part no print measured).

use memprints_log::schema::Breakdown;

/// The display names of a [`Breakdown`]'s parts, in stacking order.
pub const BREAKDOWN_PARTS: [&str; 6] = [
    "weights after setup",
    "optimizer state",
    "other static",
    "activations in flight",
    "cached (reserved, free)",
    "outside PyTorch's allocator (CUDA context, NCCL, kernels' own allocations)",
];

/// The parts of a breakdown with their display names, in stacking order; `None` for a part no
/// print measured.
pub fn breakdown_parts(b: &Breakdown) -> [(&'static str, Option<i64>); 6] {
    let bytes = [
        b.weights,
        b.optimizer_state,
        Some(b.other_static),
        Some(b.activations),
        Some(b.cached),
        Some(b.non_pytorch),
    ];
    std::array::from_fn(|i| (BREAKDOWN_PARTS[i], bytes[i]))
}
