//! Text and shapes held once for all ranks: the labels of the layer probes, the tensors' names,
//! shapes and dtypes repeat from rank to rank (ranks of a stage run the same layers), and a run
//! of 10,000 ranks holds every rank's report until it is written.
//!
//! Contract: [`Interner::rank`] replaces each shared field of a closed rank's report by the one
//! copy of its value, keeping what it says; it may run on many threads at once.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use crate::schema::RankReport;

/// One copy of each label, name, dtype and shape seen.
#[derive(Default)]
pub struct Interner {
    text: Mutex<HashSet<Arc<str>>>,
    shapes: Mutex<HashSet<Arc<[u64]>>>,
}

/// `value`'s one copy in `set`, which keeps `value` when it is the first.
fn one<T: ?Sized + Eq + Hash>(set: &Mutex<HashSet<Arc<T>>>, value: &mut Arc<T>) {
    let mut set = set.lock().unwrap_or_else(|e| e.into_inner());
    match set.get(&**value) {
        Some(kept) => *value = Arc::clone(kept),
        None => {
            set.insert(Arc::clone(value));
        }
    }
}

impl Interner {
    fn text(&self, value: &mut Arc<str>) {
        one(&self.text, value);
    }

    fn shape(&self, value: &mut Option<Arc<[u64]>>) {
        if let Some(dims) = value {
            one(&self.shapes, dims);
        }
    }

    /// Shares the probes' and saved tensors' text and shapes of `report` (see the module doc).
    pub fn rank(&self, report: &mut RankReport) {
        for probe in &mut report.layers {
            self.text(&mut probe.label);
            if let Some(t) = &mut probe.tensor {
                self.text(t);
            }
            self.shape(&mut probe.shape);
        }
        for probe in &mut report.experts {
            self.text(&mut probe.step);
            if let Some(t) = &mut probe.tensor {
                self.text(t);
            }
            self.shape(&mut probe.shape);
        }
        for tensor in report.saved_tensors.iter_mut().flat_map(|g| &mut g.tensors) {
            self.text(&mut tensor.dtype);
            self.shape(&mut tensor.shape);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_end_up_as_one_copy() {
        let interner = Interner::default();
        let (mut a, mut b): (Arc<str>, Arc<str>) = ("layer0 stage1".into(), "layer0 stage1".into());
        interner.text(&mut a);
        interner.text(&mut b);
        assert!(Arc::ptr_eq(&a, &b));
        let (mut c, mut d) = (Some(Arc::from([2u64, 512])), Some(Arc::from([2u64, 512])));
        interner.shape(&mut c);
        interner.shape(&mut d);
        assert!(Arc::ptr_eq(c.as_ref().unwrap(), d.as_ref().unwrap()));
        let mut e: Arc<str> = "layer1 stage1".into();
        interner.text(&mut e);
        assert!(!Arc::ptr_eq(&a, &e));
        assert_eq!(&*e, "layer1 stage1");
    }
}
