//! An RC connection's timers and retry counts, from the variables that
//! OFA dapl's providers read for the same transport (its `openib_common`
//! code, `dapls_ib_open_hca` and `dapls_ib_query_hca` of dapl 2.1):
//! `DAPL_ACK_TIMER`, `DAPL_ACK_RETRY`, `DAPL_RNR_TIMER`,
//! `DAPL_RNR_RETRY` and `DAPL_IB_MTU`, read once when an IA opens, with
//! OFA's defaults. udat moves its QPs through RTR and RTS itself
//! (`cm`), so each value goes where OFA puts it: the RNR timer and the
//! MTU at RTR, the ACK timer and both retry counts at RTS.
//!
//! The ACK timer is the one value whose default is rdma_cm's. Like OFA's
//! `cma` provider, which hands its QPs to `rdma_connect` and
//! `rdma_accept` and so never applies `DAPL_ACK_TIMER`, udat leaves the
//! local ACK timeout to what `rdma_init_qp_attr` computes from the
//! route's packet life time (19 on rxe, about 2.1 s a try) unless the
//! variable is set. OFA's `scm` and `ucm` default of 20 waits twice as
//! long before each retransmission on the same device.

use crate::sys;

/// OFA's transport retry count.
const ACK_RETRY: u8 = 7;
/// OFA's RNR NAK timer: code 12 of IBTA's table (Vol. 1 Table 45), 0.64 ms.
const RNR_TIMER: u8 = 12;
/// OFA's RNR retry count: 7, which IBTA makes "retry forever".
const RNR_RETRY: u8 = 7;

/// The most a 5-bit field (the timers) holds.
const FIVE_BITS: u64 = 31;
/// The most a 3-bit field (the retry counts) holds.
const THREE_BITS: u64 = 7;

/// The transport retry count rxe is given for 7. IBTA gives a
/// `retry_cnt` of 7 no special meaning (only an RNR retry count of 7 is
/// infinite), but rxe takes it as "retry forever", so a QP whose peer
/// died or whose cable was cut would never complete what it has in
/// flight: udat gives rxe 6, the most that ends.
const RXE_ACK_RETRY: u8 = 6;

/// What an RC QP of an IA is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tunables {
    /// The local ACK timeout at RTS, IBTA's exponent: 4.096 µs × 2^v a
    /// try (0: no timeout); `None` keeps rdma_cm's.
    pub ack_timer: Option<u8>,
    /// Transport retries after an ACK timeout, at RTS (and in the
    /// connection request, for the peer).
    pub ack_retry: u8,
    /// The RNR NAK timer the QP asks its peer to wait, at RTR (IBTA's
    /// 5-bit code).
    pub rnr_timer: u8,
    /// RNR retries at RTS (7: forever).
    pub rnr_retry: u8,
    /// The most the path MTU may be, at RTR; `None` keeps the path's.
    pub mtu: Option<sys::ibv_mtu::Type>,
}

impl Tunables {
    /// OFA's defaults, with no variable set and no device known.
    pub const DEFAULT: Tunables =
        Tunables { ack_timer: None, ack_retry: ACK_RETRY, rnr_timer: RNR_TIMER, rnr_retry: RNR_RETRY, mtu: None };

    /// OFA's defaults, each overridden by its variable, for a device whose
    /// own ACK delay is `ack_delay` (`local_ca_ack_delay`), which is rxe
    /// if `rxe`.
    pub fn from_env(ack_delay: u8, rxe: bool) -> Tunables {
        Tunables::read(|name| std::env::var(name).ok(), ack_delay, rxe)
    }

    fn read(var: impl Fn(&str) -> Option<String>, ack_delay: u8, rxe: bool) -> Tunables {
        let value = |name: &str, default: u8, most: u64| {
            var(name).and_then(|v| number(&v)).map_or(default, |v| v.min(most) as u8)
        };
        // OFA never waits less for an ACK than the device says it takes
        // to send one.
        let ack_timer = var("DAPL_ACK_TIMER")
            .and_then(|v| number(&v))
            .map(|v| (v.min(FIVE_BITS) as u8).max(ack_delay.min(FIVE_BITS as u8)));
        let mut ack_retry = value("DAPL_ACK_RETRY", ACK_RETRY, THREE_BITS);
        if rxe && ack_retry == 7 {
            ack_retry = RXE_ACK_RETRY;
        }
        Tunables {
            ack_timer,
            ack_retry,
            rnr_timer: value("DAPL_RNR_TIMER", RNR_TIMER, FIVE_BITS),
            rnr_retry: value("DAPL_RNR_RETRY", RNR_RETRY, THREE_BITS),
            mtu: var("DAPL_IB_MTU").and_then(|v| number(&v)).map(mtu),
        }
    }

    /// The path MTU a connection uses where rdma_cm computed `path`: the
    /// smaller of the two (OFA: the port's active MTU, or the variable's
    /// value if that is smaller).
    pub fn path_mtu(&self, path: sys::ibv_mtu::Type) -> sys::ibv_mtu::Type {
        self.mtu.map_or(path, |m| m.min(path))
    }
}

/// A variable's value as OFA reads it (`strtol` with base 0): decimal,
/// or hexadecimal after `0x`. Anything else leaves the default.
fn number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// `DAPL_IB_MTU`'s bytes as a verbs MTU: 256, 512, 1024 or 2048, and
/// 4096 for any other value, as OFA's `dapl_ib_mtu` reads it.
fn mtu(bytes: u64) -> sys::ibv_mtu::Type {
    use sys::ibv_mtu as m;
    match bytes {
        256 => m::IBV_MTU_256,
        512 => m::IBV_MTU_512,
        1024 => m::IBV_MTU_1024,
        2048 => m::IBV_MTU_2048,
        _ => m::IBV_MTU_4096,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::ibv_mtu as m;

    fn with(vars: &[(&str, &str)], ack_delay: u8, rxe: bool) -> Tunables {
        Tunables::read(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()), ack_delay, rxe)
    }

    #[test]
    fn unset_variables_give_ofa_defaults() {
        let t = with(&[], 0, false);
        assert_eq!(t, Tunables { ack_timer: None, ack_retry: 7, rnr_timer: 12, rnr_retry: 7, mtu: None });
        assert_eq!(t, Tunables::DEFAULT);
        assert_eq!(t.path_mtu(m::IBV_MTU_1024), m::IBV_MTU_1024);
    }

    #[test]
    fn each_variable_overrides_its_default_in_decimal_or_hex() {
        let vars = [
            ("DAPL_ACK_TIMER", "21"),
            ("DAPL_ACK_RETRY", "3"),
            ("DAPL_RNR_TIMER", "0x1c"),
            ("DAPL_RNR_RETRY", " 5 "),
            ("DAPL_IB_MTU", "1024"),
        ];
        let t = with(&vars, 0, false);
        assert_eq!(
            t,
            Tunables { ack_timer: Some(21), ack_retry: 3, rnr_timer: 28, rnr_retry: 5, mtu: Some(m::IBV_MTU_1024) }
        );
        assert_eq!(t.path_mtu(m::IBV_MTU_4096), m::IBV_MTU_1024);
        assert_eq!(t.path_mtu(m::IBV_MTU_512), m::IBV_MTU_512);
    }

    #[test]
    fn values_beyond_a_field_are_its_largest_and_garbage_is_the_default() {
        let vars =
            [("DAPL_ACK_TIMER", "99"), ("DAPL_ACK_RETRY", "12"), ("DAPL_RNR_TIMER", "ten"), ("DAPL_IB_MTU", "9000")];
        let t = with(&vars, 0, false);
        assert_eq!((t.ack_timer, t.ack_retry, t.rnr_timer), (Some(31), 7, 12));
        assert_eq!(t.mtu, Some(m::IBV_MTU_4096));
    }

    #[test]
    fn the_ack_timer_is_never_below_the_devices_ack_delay() {
        assert_eq!(with(&[("DAPL_ACK_TIMER", "10")], 15, false).ack_timer, Some(15));
        assert_eq!(with(&[("DAPL_ACK_TIMER", "18")], 15, false).ack_timer, Some(18));
    }

    #[test]
    fn an_unset_or_unreadable_ack_timer_keeps_rdma_cms() {
        assert_eq!(with(&[], 15, false).ack_timer, None);
        assert_eq!(with(&[("DAPL_ACK_TIMER", "soon")], 15, true).ack_timer, None);
    }

    #[test]
    fn rxe_gets_six_transport_retries_for_seven_and_any_lower_count_as_asked() {
        assert_eq!(with(&[], 0, true).ack_retry, 6);
        assert_eq!(with(&[("DAPL_ACK_RETRY", "7")], 0, true).ack_retry, 6);
        assert_eq!(with(&[("DAPL_ACK_RETRY", "4")], 0, true).ack_retry, 4);
        assert_eq!(with(&[], 0, true).rnr_retry, 7, "an RNR retry count of 7 is IBTA's forever, on rxe too");
    }
}
