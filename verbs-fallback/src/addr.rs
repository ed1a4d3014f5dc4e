//! `DAT_IA_ADDRESS_PTR` is a `struct sockaddr *`; udat keeps the bytes of
//! a `sockaddr_in` or `sockaddr_in6` in an [`IaAddress`].

use crate::sys::{sockaddr, sockaddr_storage};
use udat_core::types::IaAddress;

const AF_INET: u16 = libc::AF_INET as u16;
const AF_INET6: u16 = libc::AF_INET6 as u16;

/// An IPv4 address and port.
pub fn ipv4(octets: [u8; 4], port: u16) -> IaAddress {
    let mut a = IaAddress::default();
    a.bytes[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
    a.bytes[2..4].copy_from_slice(&port.to_be_bytes());
    a.bytes[4..8].copy_from_slice(&octets);
    a
}

/// The port of an address (0 for an unknown family).
pub fn port(a: &IaAddress) -> u16 {
    match family(a) {
        AF_INET | AF_INET6 => u16::from_be_bytes([a.bytes[2], a.bytes[3]]),
        _ => 0,
    }
}

fn family(a: &IaAddress) -> u16 {
    u16::from_ne_bytes([a.bytes[0], a.bytes[1]])
}

/// `a` with its port replaced, as socket storage for rdma_cm; `None` if
/// the family is neither IPv4 nor IPv6.
pub fn to_storage(a: &IaAddress, port: u16) -> Option<sockaddr_storage> {
    if !matches!(family(a), AF_INET | AF_INET6) {
        return None;
    }
    let mut bytes = a.bytes;
    bytes[2..4].copy_from_slice(&port.to_be_bytes());
    // SAFETY: sockaddr_storage is plain bytes; every pattern is valid.
    let mut storage: sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: sockaddr_storage (128 bytes) holds the 28 copied.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&raw mut storage).cast::<u8>(), bytes.len()) };
    Some(storage)
}

/// The address behind a `sockaddr` pointer from rdma_cm.
///
/// # Safety
/// `sa` points to a valid `sockaddr_in` or `sockaddr_in6` (or another
/// family, which reads as unknown).
pub unsafe fn from_sockaddr(sa: *const sockaddr) -> IaAddress {
    let mut a = IaAddress::default();
    // SAFETY: the caller guarantees the family field is readable.
    let len = match unsafe { (*sa).sa_family } {
        AF_INET => 16,
        AF_INET6 => 28,
        _ => return a,
    };
    // SAFETY: a sockaddr of that family has `len` readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(sa.cast::<u8>(), a.bytes.as_mut_ptr(), len) };
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_round_trips_through_storage() {
        let a = ipv4([192, 0, 2, 1], 0);
        let s = to_storage(&a, 4791).unwrap();
        // SAFETY: storage is a valid sockaddr_in.
        let b = unsafe { from_sockaddr((&raw const s).cast()) };
        assert_eq!(port(&b), 4791);
        assert_eq!(&b.bytes[4..8], &[192, 0, 2, 1]);
        assert_eq!(ipv4([192, 0, 2, 1], 4791), b);
    }

    #[test]
    fn an_unknown_family_is_refused() {
        assert!(to_storage(&IaAddress::default(), 1).is_none());
        assert_eq!(port(&IaAddress::default()), 0);
    }
}
