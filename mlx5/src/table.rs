//! A fixed-capacity table of queue state, indexed by slot.

use heapless::Vec;

/// Up to `N` values in numbered slots; a freed slot is reused.
#[derive(Debug)]
pub struct Table<T, const N: usize> {
    slots: Vec<Option<T>, N>,
}

impl<T, const N: usize> Default for Table<T, N> {
    fn default() -> Self {
        Table { slots: Vec::new() }
    }
}

impl<T, const N: usize> Table<T, N> {
    /// Store `value`: its slot, or the value back when the table is full.
    pub fn insert(&mut self, value: T) -> Result<u16, T> {
        if let Some(i) = self.slots.iter().position(Option::is_none) {
            self.slots[i] = Some(value);
            return Ok(i as u16);
        }
        if self.slots.is_full() {
            return Err(value);
        }
        let i = self.slots.len() as u16;
        // Not full (checked above): the push succeeds.
        let _ = self.slots.push(Some(value));
        Ok(i)
    }

    #[inline(always)]
    pub fn get(&self, slot: u16) -> Option<&T> {
        self.slots.get(usize::from(slot))?.as_ref()
    }

    #[inline(always)]
    pub fn get_mut(&mut self, slot: u16) -> Option<&mut T> {
        self.slots.get_mut(usize::from(slot))?.as_mut()
    }

    pub fn remove(&mut self, slot: u16) -> Option<T> {
        self.slots.get_mut(usize::from(slot))?.take()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }
}
