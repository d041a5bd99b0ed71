//! Text and shapes held once for all ranks: the labels of the layer probes, the tensors' names,
//! shapes and dtypes repeat from rank to rank (ranks of a stage run the same layers), and a run
//! of 10,000 ranks holds every rank's report until it is written.
//!
//! Contract: [`text`] and [`shape`] hand out the calling thread's one copy of a value as the
//! passes are read (no copy made and freed again for every probe and tensor), until
//! [`release_thread_copies`]: a thread that reads a report's passes lets go of them when the
//! report is made, and a worker's go with it. Ranks read on one thread share their copies; those
//! of different workers each have their worker's.

use std::cell::RefCell;
use std::sync::Arc;

/// A set of shared values. Every probe and tensor of every rank is looked up, and SipHash (the
/// default, which resists flooding) cost more than the look-up itself: foldhash, as the
/// snapshot reader uses.
type Set<T> = foldhash::HashSet<Arc<T>>;

thread_local! {
    /// The calling thread's copies ([`text`], [`shape`]).
    static COPIES: RefCell<(Set<str>, Set<[u64]>)> = RefCell::default();
}

/// The calling thread's shared copy of `value`.
pub fn text(value: &str) -> Arc<str> {
    COPIES.with_borrow_mut(|(text, _)| match text.get(value) {
        Some(kept) => Arc::clone(kept),
        None => {
            let kept: Arc<str> = value.into();
            text.insert(Arc::clone(&kept));
            kept
        }
    })
}

/// The calling thread's shared copy of `dims`.
pub fn shape(dims: &[u64]) -> Arc<[u64]> {
    COPIES.with_borrow_mut(|(_, shapes)| match shapes.get(dims) {
        Some(kept) => Arc::clone(kept),
        None => {
            let kept: Arc<[u64]> = dims.into();
            shapes.insert(Arc::clone(&kept));
            kept
        }
    })
}

/// Lets go of the calling thread's copies (those in reports stay with them).
pub fn release_thread_copies() {
    COPIES.with_borrow_mut(|copies| *copies = Default::default());
}

/// Calls [`release_thread_copies`] when dropped, on whatever path its scope is left.
pub struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_thread_copies();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_hands_out_one_copy_of_each_value_until_it_lets_go() {
        let (a, b) = (text("layer0 stage1"), text("layer0 stage1"));
        assert!(Arc::ptr_eq(&a, &b));
        let dims: Vec<u64> = (1..=11).collect();
        let long = crate::fold::passes::parse_shape("(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)").unwrap();
        assert_eq!(&long[..], &dims[..]);
        assert!(Arc::ptr_eq(&long, &shape(&dims)));
        assert_eq!(crate::fold::passes::parse_shape("(2, x)"), None);
        release_thread_copies();
        let c = text("layer0 stage1");
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, "layer0 stage1");
    }
}
