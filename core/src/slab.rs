//! Fixed-capacity, generation-checked object storage.
//!
//! Each slot has a `#[repr(C)]` [`SlotHeader`] at a stable address (a slab
//! is never moved while objects live in it), so the C ABI can hand out a
//! pointer to the header as the DAT handle. A freed slot keeps its header —
//! with the provider word and a bumped generation — as a tombstone: a stale
//! C handle still points at valid memory and is refused, never dereferenced
//! as live. Free slots are reused oldest-first.

use crate::handle::{Kind, RawHandle};

/// The per-slot header the C ABI points at. `provider` is the first word, as
/// `<dat2/dat_redirection.h>` requires of every DAT handle.
#[repr(C)]
#[derive(Debug)]
pub struct SlotHeader {
    /// Opaque to the core: the C ABI stores its `DAT_PROVIDER*` here.
    pub provider: usize,
    /// The generation a live handle must carry.
    pub generation: u32,
    /// The kind of object the slot holds.
    pub kind: Kind,
    /// The slot's index in its slab: with `generation`, the handle of the
    /// object the slot holds.
    pub index: u32,
}

#[derive(Debug)]
struct Slot<T> {
    header: SlotHeader,
    value: Option<T>,
    /// Next slot in the free FIFO (`NONE` at the tail).
    next_free: u32,
}

const NONE: u32 = u32::MAX;

/// `N` slots of `T`.
#[derive(Debug)]
pub struct Slab<T, const N: usize> {
    slots: [Slot<T>; N],
    free_head: u32,
    free_tail: u32,
    len: usize,
}

impl<T, const N: usize> Slab<T, N> {
    const FITS: () = assert!(N > 0 && N < NONE as usize, "slab capacity out of range");

    /// An empty slab whose slots hold objects of `kind`.
    pub fn new(kind: Kind) -> Self {
        let () = Self::FITS;
        let slots = core::array::from_fn(|i| Slot {
            header: SlotHeader { provider: 0, generation: 1, kind, index: i as u32 },
            value: None,
            next_free: if i + 1 < N { (i + 1) as u32 } else { NONE },
        });
        Slab { slots, free_head: 0, free_tail: (N - 1) as u32, len: 0 }
    }

    /// Store `value`; `Err(value)` when every slot is taken.
    pub fn insert(&mut self, value: T) -> Result<RawHandle, T> {
        let index = self.free_head;
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Err(value);
        };
        self.free_head = slot.next_free;
        if self.free_head == NONE {
            self.free_tail = NONE;
        }
        slot.next_free = NONE;
        slot.value = Some(value);
        self.len += 1;
        Ok(RawHandle { index, generation: slot.header.generation })
    }

    fn slot(&self, h: RawHandle) -> Option<&Slot<T>> {
        self.slots.get(h.index as usize).filter(|s| s.header.generation == h.generation && s.value.is_some())
    }

    /// The live object `h` names.
    pub fn get(&self, h: RawHandle) -> Option<&T> {
        self.slot(h)?.value.as_ref()
    }

    /// The live object `h` names, mutably.
    pub fn get_mut(&mut self, h: RawHandle) -> Option<&mut T> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.header.generation != h.generation {
            return None;
        }
        slot.value.as_mut()
    }

    /// Whether `h` names a live object.
    pub fn contains(&self, h: RawHandle) -> bool {
        self.slot(h).is_some()
    }

    /// Take the object out; its slot becomes a tombstone with a new
    /// generation and joins the tail of the free FIFO.
    pub fn remove(&mut self, h: RawHandle) -> Option<T> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.header.generation != h.generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.header.generation = match slot.header.generation.wrapping_add(1) {
            0 => 1,
            g => g,
        };
        match self.slots.get_mut(self.free_tail as usize) {
            Some(tail) => tail.next_free = h.index,
            None => self.free_head = h.index,
        }
        self.free_tail = h.index;
        self.len -= 1;
        Some(value)
    }

    /// The live object in slot `index`, with its handle.
    pub fn live_at(&self, index: u32) -> Option<(RawHandle, &T)> {
        let slot = self.slots.get(index as usize)?;
        let value = slot.value.as_ref()?;
        Some((RawHandle { index, generation: slot.header.generation }, value))
    }

    /// The header of the slot `h` points at, live or tombstone.
    pub fn header(&self, h: RawHandle) -> Option<&SlotHeader> {
        self.slots.get(h.index as usize).map(|s| &s.header)
    }

    /// Set the provider word of every slot (the C ABI does this once).
    pub fn set_provider_word(&mut self, word: usize) {
        for slot in &mut self.slots {
            slot.header.provider = word;
        }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Handles of the live objects for which `pred` holds, in slot order.
    pub fn handles_where(&self, mut pred: impl FnMut(&T) -> bool) -> crate::FixedVec<RawHandle, N> {
        let mut out = crate::FixedVec::new();
        for (h, v) in self.iter() {
            if pred(v) {
                // At most N objects live, so this cannot overflow.
                let _ = out.push(h);
            }
        }
        out
    }

    /// The live objects, with their handles.
    pub fn iter(&self) -> impl Iterator<Item = (RawHandle, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.value.as_ref().map(|v| (RawHandle { index: i as u32, generation: s.header.generation }, v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handle_refused_after_reuse() {
        let mut slab: Slab<u32, 1> = Slab::new(Kind::Pz);
        let a = slab.insert(7).unwrap();
        assert_eq!(slab.remove(a), Some(7));
        let b = slab.insert(8).unwrap();
        assert_eq!(a.index, b.index);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&8));
    }

    #[test]
    fn full_slab_hands_the_value_back() {
        let mut slab: Slab<u32, 2> = Slab::new(Kind::Pz);
        slab.insert(1).unwrap();
        slab.insert(2).unwrap();
        assert_eq!(slab.insert(3), Err(3));
        assert_eq!(slab.len(), 2);
    }

    #[test]
    fn slots_are_reused_oldest_first() {
        let mut slab: Slab<u32, 3> = Slab::new(Kind::Pz);
        let h: [RawHandle; 3] = core::array::from_fn(|i| slab.insert(i as u32).unwrap());
        slab.remove(h[1]);
        slab.remove(h[0]);
        assert_eq!(slab.insert(10).unwrap().index, 1);
        assert_eq!(slab.insert(11).unwrap().index, 0);
    }

    #[test]
    fn null_handle_never_live() {
        let mut slab: Slab<u32, 2> = Slab::new(Kind::Pz);
        slab.insert(1).unwrap();
        assert!(slab.get(RawHandle::NULL).is_none());
    }

    #[test]
    fn tombstone_keeps_provider_word() {
        let mut slab: Slab<u32, 2> = Slab::new(Kind::Ep);
        slab.set_provider_word(0xabc);
        let h = slab.insert(1).unwrap();
        slab.remove(h);
        let hdr = slab.header(h).unwrap();
        assert_eq!(hdr.provider, 0xabc);
        assert_ne!(hdr.generation, h.generation);
        assert_eq!(hdr.kind, Kind::Ep);
    }
}
