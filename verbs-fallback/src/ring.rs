//! The requests a QP has outstanding, in post order, in a ring whose room
//! is made when the QP is: a post neither allocates nor grows it, and no
//! index is a division.

/// A ring of at most `capacity` values, oldest first.
pub(crate) struct Ring<T> {
    slots: Box<[T]>,
    /// The oldest value's slot.
    head: usize,
    len: usize,
}

impl<T: Copy> Ring<T> {
    /// An empty ring of `capacity` slots, each `filler` until used.
    pub fn new(capacity: usize, filler: T) -> Ring<T> {
        Ring { slots: vec![filler; capacity].into_boxed_slice(), head: 0, len: 0 }
    }

    /// The slot of the `i`th value from the oldest, for `i` below the
    /// capacity.
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        let j = self.head + i;
        if j >= self.slots.len() {
            j - self.slots.len()
        } else {
            j
        }
    }

    /// Add `value` as the newest; `Err(value)` when the ring is full.
    #[inline(always)]
    pub fn push_back(&mut self, value: T) -> Result<(), T> {
        if self.len == self.slots.len() {
            return Err(value);
        }
        let at = self.at(self.len);
        self.slots[at] = value;
        self.len += 1;
        Ok(())
    }

    /// Take the oldest value.
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head];
        self.head = self.at(1);
        self.len -= 1;
        Some(value)
    }

    /// Take the newest value.
    pub fn pop_back(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.slots[self.at(self.len)])
    }

    /// The `i`th value from the oldest.
    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.slots[self.at(i)])
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The values, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).map(|i| &self.slots[self.at(i)])
    }
}

impl<T> Default for Ring<T> {
    /// A ring with no room.
    fn default() -> Ring<T> {
        Ring { slots: Box::new([]), head: 0, len: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn values_leave_in_post_order_across_the_wrap_and_a_full_ring_refuses() {
        let mut ring = Ring::new(3, 0u32);
        assert_eq!((ring.push_back(1), ring.push_back(2), ring.push_back(3)), (Ok(()), Ok(()), Ok(())));
        assert_eq!(ring.push_back(4), Err(4), "full");
        assert_eq!(ring.pop_front(), Some(1));
        assert_eq!(ring.push_back(4), Ok(()), "into the freed slot, past the end");
        assert_eq!((ring.front(), ring.back(), ring.get(1), ring.get(3)), (Some(&2), Some(&4), Some(&3), None));
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(ring.pop_back(), Some(4));
        assert_eq!((ring.pop_front(), ring.pop_front(), ring.pop_front()), (Some(2), Some(3), None));
        assert_eq!((ring.front(), ring.back()), (None, None));
        assert_eq!(ring.pop_back(), None);
        assert_eq!(Ring::<u32>::default().push_back(1), Err(1), "no room");
    }
}
