//! What the memory prints of one pp rank measured, as [`mod@super::compare`] sets it against the
//! estimator and [`super::corrections`] corrects it: the input of both, owned by neither.

use super::schedule::PrintPoint;

/// One pipeline print of the pp rank's first `step()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredPrint {
    /// Where the print sits in `DualPipeV.step()`.
    pub point: PrintPoint,
    /// `alloc=`, bytes.
    pub allocated: i64,
    /// `cached=`: reserved but not allocated, bytes.
    pub cached: i64,
    /// `non-pt=`: device memory outside PyTorch's allocator, bytes.
    pub non_pytorch: i64,
}

/// One `layerL stageS saved tensors:` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasuredSaved {
    /// L: the decoder layer's index in the whole model.
    pub layer: u32,
    /// 1, 3 or 5.
    pub stage: u8,
    /// The group's `activ=` figure, bytes.
    pub activations: i64,
}

/// What the memory prints of one pp rank measured, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Measured {
    /// The pp rank the prints came from.
    pub pp_rank: u32,
    /// The pipeline prints of the first `step()` the process ran, in print order.
    pub pipeline: Vec<MeasuredPrint>,
    /// Allocated at `setup_model | after apply_fsdp` (the sharded parameters); `None` when the
    /// log has no such print.
    pub params_after_setup: Option<i64>,
    /// `load_ckpt | optimizer state:`; `None` when no checkpoint was loaded.
    pub optimizer_state: Option<i64>,
    /// PithTrain's own `Load checkpoint: <path>` line is in the run's log: the run resumed,
    /// whether or not a `load_ckpt` print measured what it loaded.
    pub resumed: bool,
    /// The first complete saved-tensors group of each layer stage, in print order.
    pub saved_tensors: Vec<MeasuredSaved>,
    /// The cuBLAS/cuBLASLt workspace held at the peak, bytes, as the rank's memory snapshot
    /// names it (the caching allocator holds it, so it is in `alloc=`); `Some(0)` when a
    /// snapshot names none, `None` without a snapshot (see [`super::corrections`]).
    pub cublas_workspace: Option<i64>,
    /// The snapshot that figure was read from (its path), for the correction's sentence.
    pub workspace_from: Option<String>,
}

impl Measured {
    /// The highest pipeline print (the first of equals).
    pub fn peak(&self) -> Option<&MeasuredPrint> {
        self.pipeline.iter().reduce(|best, p| {
            if p.allocated > best.allocated {
                p
            } else {
                best
            }
        })
    }
}
