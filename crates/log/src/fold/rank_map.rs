//! A map from global rank to a value, for the per-print look-ups of the fold.
//!
//! Contract: behaves as a `BTreeMap<u32, T>` for what the fold asks of it (insert on first
//! use, look up, iterate in rank order). Ranks below [`DENSE`] sit in a vector indexed by rank,
//! so the look-up on every print is an index rather than a tree walk; larger ranks (only ever
//! in forged logs) go to a tree.

use std::collections::BTreeMap;

/// Ranks below this are stored by index.
pub const DENSE: u32 = 1 << 16;

/// Values by rank.
#[derive(Debug)]
pub struct RankMap<T> {
    /// For each rank below [`DENSE`], 1 + its value's index in `values` (0: none).
    slot: Vec<u32>,
    /// The values of ranks below [`DENSE`], in the order they came.
    values: Vec<T>,
    sparse: BTreeMap<u32, T>,
}

impl<T> Default for RankMap<T> {
    fn default() -> Self {
        RankMap {
            slot: Vec::new(),
            values: Vec::new(),
            sparse: BTreeMap::new(),
        }
    }
}

impl<T> RankMap<T> {
    /// The value of `rank`, made by `make` when there is none yet.
    pub fn get_or_insert_with(&mut self, rank: u32, make: impl FnOnce() -> T) -> &mut T {
        if rank >= DENSE {
            return self.sparse.entry(rank).or_insert_with(make);
        }
        let i = rank as usize;
        if i >= self.slot.len() {
            self.slot.resize(i + 1, 0);
        }
        if self.slot[i] == 0 {
            self.values.push(make());
            self.slot[i] = self.values.len() as u32;
        }
        &mut self.values[self.slot[i] as usize - 1]
    }

    /// The value of `rank`, if any.
    pub fn get(&self, rank: u32) -> Option<&T> {
        if rank >= DENSE {
            return self.sparse.get(&rank);
        }
        let slot = *self.slot.get(rank as usize)?;
        self.values.get((slot as usize).checked_sub(1)?)
    }

    /// The value of `rank`, if any, to change.
    pub fn get_mut(&mut self, rank: u32) -> Option<&mut T> {
        if rank >= DENSE {
            return self.sparse.get_mut(&rank);
        }
        let slot = *self.slot.get(rank as usize)?;
        self.values.get_mut((slot as usize).checked_sub(1)?)
    }

    /// The values, by rank.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slot
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| &self.values[s as usize - 1])
            .chain(self.sparse.values())
    }

    /// The values, by rank, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let order = self.order();
        let mut values: Vec<Option<&mut T>> = self.values.iter_mut().map(Some).collect();
        order
            .into_iter()
            .filter_map(move |i| values[i].take())
            .chain(self.sparse.values_mut())
    }

    /// The values, by rank, taken.
    pub fn into_values(self) -> impl Iterator<Item = T> {
        let order = self.order();
        let mut values: Vec<Option<T>> = self.values.into_iter().map(Some).collect();
        order
            .into_iter()
            .filter_map(move |i| values[i].take())
            .chain(self.sparse.into_values())
    }

    /// The ranks that have a value, in rank order.
    pub fn ranks(&self) -> impl Iterator<Item = u32> + '_ {
        self.slot
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s != 0)
            .map(|(rank, _)| rank as u32)
            .chain(self.sparse.keys().copied())
    }

    /// The values with their ranks, taken, in rank order.
    pub fn into_entries(self) -> impl Iterator<Item = (u32, T)> {
        let ranks: Vec<u32> = self.ranks().collect();
        ranks.into_iter().zip(self.into_values())
    }

    /// Indices into `values`, by rank.
    fn order(&self) -> Vec<usize> {
        self.slot
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| s as usize - 1)
            .collect()
    }
}

impl<T: Default> RankMap<T> {
    /// The value of `rank`, a default one when there is none yet.
    pub fn get_or_default(&mut self, rank: u32) -> &mut T {
        self.get_or_insert_with(rank, T::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_in_rank_order_across_both_stores() {
        let mut m = RankMap::default();
        for rank in [u32::MAX, 7, DENSE, 0, DENSE - 1] {
            *m.get_or_default(rank) += rank as u64;
        }
        *m.get_or_default(7) += 1;
        let got: Vec<u64> = m.values().copied().collect();
        let want = [
            0,
            8,
            u64::from(DENSE - 1),
            u64::from(DENSE),
            u64::from(u32::MAX),
        ];
        assert_eq!(got, want);
        assert_eq!(m.get_mut(3), None);
        assert_eq!(m.get_mut(u32::MAX).copied(), Some(u64::from(u32::MAX)));
    }
}
