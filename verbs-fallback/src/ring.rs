//! The requests a queue has outstanding, in post order, each named by its
//! sequence number: a work request's `wr_id` carries that number, and its
//! low bits are the request's slot, so a completion finds its request
//! with one mask and one compare, and retires those posted before it by
//! moving one counter. The room is made when the QP is: a post neither
//! allocates nor grows it, and no index is a division.

/// Values numbered from 0 as they are added, of which at most `limit`
/// are outstanding, oldest first.
pub(crate) struct Ring<T> {
    /// A power of two of slots (or none), at least `limit`: the value
    /// numbered `seq` lives in slot `seq & (len - 1)`.
    slots: Box<[T]>,
    /// The number of the oldest outstanding value.
    head: u64,
    /// The number the next value takes.
    tail: u64,
    /// Most values outstanding at once.
    limit: u64,
}

impl<T: Copy> Ring<T> {
    /// An empty ring that holds up to `limit` values, each slot `filler`
    /// until used.
    pub fn new(limit: usize, filler: T) -> Ring<T> {
        let slots = vec![filler; limit.next_power_of_two()].into_boxed_slice();
        Ring { slots, head: 0, tail: 0, limit: limit as u64 }
    }

    /// The slot of the outstanding value (or the next one) `seq`.
    #[inline(always)]
    fn slot(&self, seq: u64) -> usize {
        debug_assert!(self.slots.len().is_power_of_two() && seq.wrapping_sub(self.head) <= self.tail - self.head);
        seq as usize & self.slots.len().wrapping_sub(1)
    }

    /// Whether `seq` names an outstanding value.
    #[inline(always)]
    fn outstanding(&self, seq: u64) -> bool {
        seq.wrapping_sub(self.head) < self.tail - self.head
    }

    /// Write `value` under the next number, which it returns, without
    /// making it outstanding ([`Ring::commit`] does); `None` when
    /// `limit` values are outstanding. A value written and not committed
    /// is overwritten by the next one.
    #[inline(always)]
    pub fn stage(&mut self, value: T) -> Option<u64> {
        if self.tail - self.head >= self.limit {
            return None;
        }
        let at = self.slot(self.tail);
        // SAFETY: `limit` values fit, so the ring has a slot for each
        // (`new`), and `slot` masks into the power-of-two slice.
        unsafe { *self.slots.get_unchecked_mut(at) = value };
        Some(self.tail)
    }

    /// Make the value [`Ring::stage`] wrote outstanding.
    #[inline(always)]
    pub fn commit(&mut self) {
        debug_assert!(self.tail - self.head < self.limit);
        self.tail += 1;
    }

    /// The outstanding value `seq`.
    #[inline(always)]
    pub fn get(&self, seq: u64) -> Option<&T> {
        if !self.outstanding(seq) {
            return None;
        }
        // SAFETY: an outstanding value's slot is in the slice (`slot`).
        Some(unsafe { self.slots.get_unchecked(self.slot(seq)) })
    }

    /// The outstanding value `seq`, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        if !self.outstanding(seq) {
            return None;
        }
        let at = self.slot(seq);
        // SAFETY: an outstanding value's slot is in the slice (`slot`).
        Some(unsafe { self.slots.get_unchecked_mut(at) })
    }

    /// Retire the outstanding value `seq` and every one before it: the
    /// value, and how many left.
    #[inline(always)]
    pub fn take_through(&mut self, seq: u64) -> Option<(T, u32)> {
        let value = *self.get(seq)?;
        let retired = seq - self.head + 1;
        self.head = seq + 1;
        Some((value, retired as u32))
    }

    /// Take the oldest value.
    pub fn pop_front(&mut self) -> Option<T> {
        let (value, _) = self.take_through(self.head)?;
        Some(value)
    }

    /// The oldest value.
    #[inline(always)]
    pub fn front(&self) -> Option<&T> {
        self.get(self.head)
    }

    /// The outstanding values, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        (self.head..self.tail).filter_map(|seq| self.get(seq))
    }
}

impl<T> Default for Ring<T> {
    /// A ring with no room.
    fn default() -> Ring<T> {
        Ring { slots: Box::new([]), head: 0, tail: 0, limit: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn values_are_found_by_number_across_the_wrap_and_a_full_ring_refuses() {
        let mut ring = Ring::new(3, 0u32);
        for v in [10, 11, 12] {
            let seq = ring.stage(v).expect("room");
            assert_eq!(seq, u64::from(v - 10));
            ring.commit();
        }
        assert_eq!(ring.stage(13), None, "full at the limit, though the ring has a fourth slot");
        assert_eq!(ring.pop_front(), Some(10));
        assert_eq!(ring.stage(13), Some(3), "into the freed slot");
        ring.commit();
        assert_eq!(ring.take_through(2), Some((12, 2)), "retires 1 and 2");
        assert_eq!(ring.stage(14), Some(4), "staged, not committed");
        assert_eq!(ring.get(4), None, "a staged value is not outstanding");
        assert_eq!(ring.stage(15), Some(4), "the next stage overwrites it");
        ring.commit();
        assert_eq!((ring.get(2), ring.get(3), ring.get(4), ring.get(5)), (None, Some(&13), Some(&15), None));
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [13, 15]);
        assert_eq!(ring.take_through(2), None, "already retired");
        assert_eq!(ring.take_through(9), None, "never posted");
        *ring.get_mut(3).expect("outstanding") = 23;
        assert_eq!(ring.front(), Some(&23));
        assert_eq!((ring.pop_front(), ring.pop_front(), ring.pop_front()), (Some(23), Some(15), None));
        for n in 0..20u32 {
            assert_eq!(ring.stage(n), Some(5 + u64::from(n)), "wraps the slots many times");
            ring.commit();
            assert_eq!(ring.take_through(5 + u64::from(n)), Some((n, 1)));
        }
        assert_eq!(Ring::<u32>::default().stage(1), None, "no room");
        assert_eq!(Ring::<u32>::default().get(0), None);
    }
}
