//! The six files the skill edits, as a type: [`Target`] names one, [`PerTarget`] holds one value
//! for each (their sources, their paths, their planned changes), indexed by `Target`, in the
//! skill's execution order.

use std::ops::{Index, IndexMut};

/// One of the six files the skill edits, in the skill's execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// `pithtrain/dualpipe/execution.py`: groups 1B and 5A.
    Execution,
    /// `pithtrain/dualpipe/dualpipev.py`: groups 1A and 4.
    DualPipeV,
    /// `pithtrain/models/<model>.py`: groups 5B-5E.
    Model,
    /// `pithtrain/modules/distributed.py`: group 2.
    Distributed,
    /// `pithtrain/modules/training.py`: groups 1C and 3.
    Training,
    /// `pithtrain/tasks/pretrain_lm.py`: groups 6 and 7.
    PretrainLm,
}

impl Target {
    /// The six, in the skill's execution order.
    pub const ALL: [Target; 6] = [
        Target::Execution,
        Target::DualPipeV,
        Target::Model,
        Target::Distributed,
        Target::Training,
        Target::PretrainLm,
    ];

    /// The path relative to the repository root; `None` for [`Target::Model`], whose file
    /// depends on the model.
    pub const fn fixed_path(self) -> Option<&'static str> {
        match self {
            Target::Execution => Some(super::EXECUTION),
            Target::DualPipeV => Some(super::DUALPIPEV),
            Target::Model => None,
            Target::Distributed => Some(super::DISTRIBUTED),
            Target::Training => Some(super::TRAINING),
            Target::PretrainLm => Some(super::PRETRAIN_LM),
        }
    }

    /// The path relative to the repository root, with `model_rel` for [`Target::Model`].
    pub fn path(self, model_rel: &str) -> &str {
        self.fixed_path().unwrap_or(model_rel)
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// One `T` for each of the six targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerTarget<T>([T; 6]);

impl<T> PerTarget<T> {
    /// Builds the six values from a function of the target.
    pub fn from_fn(mut f: impl FnMut(Target) -> T) -> Self {
        PerTarget(Target::ALL.map(&mut f))
    }

    /// Builds the six values from a fallible function, stopping at the first error.
    pub fn try_from_fn<E>(mut f: impl FnMut(Target) -> Result<T, E>) -> Result<Self, E> {
        let mut values = Vec::with_capacity(6);
        for target in Target::ALL {
            values.push(f(target)?);
        }
        Ok(PerTarget(values.try_into().unwrap_or_else(|_| {
            unreachable!("six targets give six values")
        })))
    }

    /// The targets with their values, in execution order.
    pub fn entries(&self) -> impl Iterator<Item = (Target, &T)> {
        Target::ALL.into_iter().zip(self.0.iter())
    }

    /// The values, in execution order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }

    /// Mutable values, in execution order.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.0.iter_mut()
    }

    /// Applies `f` to each value.
    pub fn map<U>(self, mut f: impl FnMut(Target, T) -> U) -> PerTarget<U> {
        let mut targets = Target::ALL.into_iter();
        PerTarget(self.0.map(|value| f(targets.next().expect("six"), value)))
    }

    /// References to the values.
    pub fn as_ref(&self) -> PerTarget<&T> {
        PerTarget::from_fn(|target| &self[target])
    }
}

impl<T> Index<Target> for PerTarget<T> {
    type Output = T;
    fn index(&self, target: Target) -> &T {
        &self.0[target.index()]
    }
}

impl<T> IndexMut<Target> for PerTarget<T> {
    fn index_mut(&mut self, target: Target) -> &mut T {
        &mut self.0[target.index()]
    }
}

impl<'a, T> IntoIterator for &'a PerTarget<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut PerTarget<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl<T> IntoIterator for PerTarget<T> {
    type Item = T;
    type IntoIter = std::array::IntoIter<T, 6>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_indexed_by_target_in_execution_order() {
        let paths = PerTarget::from_fn(|t| t.path("pithtrain/models/x.py").to_string());
        assert_eq!(paths[Target::Model], "pithtrain/models/x.py");
        assert_eq!(paths[Target::Execution], "pithtrain/dualpipe/execution.py");
        let order: Vec<Target> = paths.entries().map(|(t, _)| t).collect();
        assert_eq!(order, Target::ALL);
    }

    #[test]
    fn a_failing_builder_stops_at_the_first_error() {
        let mut seen = Vec::new();
        let result: Result<PerTarget<()>, Target> = PerTarget::try_from_fn(|t| {
            seen.push(t);
            if t == Target::Model { Err(t) } else { Ok(()) }
        });
        assert_eq!(result, Err(Target::Model));
        assert_eq!(seen.len(), 3);
    }
}
