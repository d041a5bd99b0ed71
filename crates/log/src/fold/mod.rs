//! The fold: the items a scanner found ([`crate::scan::Item`], in file order) into runs, ranks
//! and passes, the types of [`crate::schema`]. Nothing here knows how the lines were found.
//!
//! [`builder`] (the [`ReportBuilder`], a [`crate::scan::Sink`], and the merge of one file
//! folded alone, [`builder::Overlap`]), [`runs`] (telling launches
//! apart), [`rank_map`] (its per-rank states), [`passes`] (one rank's pipeline passes, which
//! are read in detail), [`saved`] (saved tensors' exact bytes), [`summary`] (peaks, the
//! breakdown at the peak, the cross-rank imbalance), [`intern`] (text and shapes held once for
//! all ranks).

pub mod builder;
pub mod intern;
pub mod passes;
pub mod rank_map;
pub mod runs;
pub mod saved;
pub mod summary;

pub use builder::ReportBuilder;
