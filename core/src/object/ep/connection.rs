//! An Endpoint's connection: its state as the pages move it, and what
//! connection management keeps beside the state (who holds the EP, the
//! peer, the peer's private data).
//!
//! Every change of state is a method here, named for what happened, with
//! the state it leaves from in its comment (the state diagram of
//! dat_ep_create(3DAT) and the connection pages). The provider says what
//! happened, across the objects it concerns, and delivers the events; it
//! never picks a state itself.

use crate::backend::{ConnOutcome, PrivateData};
use crate::event::EventNumber;
use crate::handle::{CrHandle, RspHandle};
use crate::types::{EpState, IaAddress};

/// An EP's state and its connection's facts.
#[derive(Debug)]
pub(crate) struct Connection {
    state: EpState,
    /// Created by a PSP with `DAT_PSP_PROVIDER` and not yet accepted on.
    provider_owned: bool,
    /// The Connection Request pending on this EP (passive states).
    pub(crate) cr: CrHandle,
    /// The RSP holding this EP (Reserved).
    rsp: RspHandle,
    pub(crate) remote: IaAddress,
    pub(crate) remote_port: u64,
    pub(crate) remote_conn_qual: u64,
    /// The peer's private data: of the established connection (active
    /// side), or of its rejection.
    pub(crate) private_data: PrivateData,
}

/// What the EP's connection event is, once the EP has taken an outcome
/// of its connection manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reached {
    /// Connected: `DAT_CONNECTION_EVENT_ESTABLISHED`, with this much of
    /// the peer's private data.
    Established { private_data_size: u32 },
    /// The connection did not come up or is gone: the EP is to be
    /// [`Connection::lose`]n with this event.
    Lost(EventNumber),
}

impl Connection {
    /// A connection in `state`: Unconnected for the consumer's EPs,
    /// Tentative Connection Pending for the one a PSP of
    /// `DAT_PSP_PROVIDER` makes for a request (`provider_owned`).
    pub(crate) fn new(state: EpState, provider_owned: bool) -> Connection {
        Connection {
            state,
            provider_owned,
            cr: CrHandle::NULL,
            rsp: RspHandle::NULL,
            remote: IaAddress::default(),
            remote_port: 0,
            remote_conn_qual: 0,
            private_data: PrivateData::new(),
        }
    }

    #[inline(always)]
    pub(crate) fn state(&self) -> EpState {
        self.state
    }

    /// Whether a PSP's provider made this EP and no accept has given it
    /// to the consumer.
    pub(crate) fn provider_owned(&self) -> bool {
        self.provider_owned
    }

    /// The RSP that holds this EP, or none.
    pub(crate) fn rsp(&self) -> RspHandle {
        self.rsp
    }

    /// dat_ep_connect(3DAT), from Unconnected: the request is on its way
    /// to `remote`'s `qual` (Active Connection Pending).
    pub(crate) fn connect(&mut self, remote: IaAddress, qual: u64) {
        self.state = EpState::ActiveConnectionPending;
        self.remote = remote;
        self.remote_conn_qual = qual;
        self.remote_port = qual;
    }

    /// dat_cr_accept(3DAT), from a passive pending state: the EP is the
    /// consumer's, and waits for the connection to complete (Completion
    /// Pending) with the requester at `remote`, `remote_port`.
    pub(crate) fn accept(&mut self, remote: IaAddress, remote_port: u64) {
        self.state = EpState::CompletionPending;
        self.provider_owned = false;
        self.cr = CrHandle::NULL;
        self.remote = remote;
        self.remote_port = remote_port;
    }

    /// dat_rsp_create(3DAT), from Unconnected: `rsp` holds the EP
    /// (Reserved).
    pub(crate) fn reserve(&mut self, rsp: RspHandle) {
        self.state = EpState::Reserved;
        self.rsp = rsp;
    }

    /// A request arrived at the RSP that held this Reserved EP: the RSP is
    /// gone, and the EP waits for the consumer's answer (Passive
    /// Connection Pending).
    pub(crate) fn request_arrived(&mut self) {
        self.state = EpState::PassiveConnectionPending;
        self.rsp = RspHandle::NULL;
        self.cr = CrHandle::NULL;
    }

    /// The RSP or the CR that held the consumer's EP let it go without a
    /// connection (an RSP freed, a request rejected): Unconnected again.
    /// (A provider's EP is freed instead.)
    pub(crate) fn release(&mut self) {
        self.state = EpState::Unconnected;
        self.rsp = RspHandle::NULL;
        self.cr = CrHandle::NULL;
    }

    /// dat_ep_disconnect(3DAT) graceful, from Connected: Disconnect
    /// Pending until the transport says the connection is down.
    pub(crate) fn disconnect(&mut self) {
        self.state = EpState::DisconnectPending;
    }

    /// The connection is gone, or never came up (an abrupt disconnect, a
    /// rejection, a broken connection, a failed DTO): Disconnected, from
    /// any state that had or was making one.
    pub(crate) fn lose(&mut self) {
        self.state = EpState::Disconnected;
    }

    /// A UD EP (`DAT_IB_SERVICE_TYPE_UD`) resolved a peer: Connected from
    /// Unconnected, and unchanged by every later peer.
    pub(crate) fn resolve_peer(&mut self) {
        if self.state == EpState::Unconnected {
            self.state = EpState::Connected;
        }
    }

    /// dat_ep_reset(3DAT), from Disconnected: Unconnected, the peer and
    /// its private data forgotten.
    pub(crate) fn reset(&mut self) {
        self.state = EpState::Unconnected;
        self.private_data.clear();
        self.remote = IaAddress::default();
        self.remote_port = 0;
    }

    /// What the connection manager's `outcome` (with the peer's
    /// `private_data`) is to this EP in its state; `None` when it is stale
    /// (the EP moved on: an abrupt local disconnect already reported
    /// DISCONNECTED, say).
    pub(crate) fn take(&mut self, outcome: ConnOutcome, private_data: PrivateData) -> Option<Reached> {
        use EpState::*;
        let number = match (outcome, self.state) {
            (ConnOutcome::Established, ActiveConnectionPending) => {
                // dat_evd_wait(3DAT): for the active side the event carries
                // the peer's private data, valid until the EP is freed or
                // reset.
                self.state = Connected;
                self.private_data = private_data;
                return Some(Reached::Established { private_data_size: self.private_data.len() as u32 });
            }
            (ConnOutcome::Established, CompletionPending) => {
                self.state = Connected;
                return Some(Reached::Established { private_data_size: 0 });
            }
            (ConnOutcome::PeerRejected, ActiveConnectionPending) => {
                // DAT 2.0 dat_cr_reject: the rejecting peer's private data
                // reaches the active side, as the accepting peer's does.
                self.private_data = private_data;
                EventNumber::ConnectionPeerRejected
            }
            (ConnOutcome::NonPeerRejected, ActiveConnectionPending) => EventNumber::ConnectionNonPeerRejected,
            (ConnOutcome::Unreachable, ActiveConnectionPending) => EventNumber::ConnectionUnreachable,
            (ConnOutcome::TimedOut, ActiveConnectionPending) => EventNumber::ConnectionTimedOut,
            (ConnOutcome::AcceptError, CompletionPending) => EventNumber::ConnectionAcceptCompletionError,
            (ConnOutcome::Disconnected, Connected | DisconnectPending) => EventNumber::ConnectionDisconnected,
            (ConnOutcome::Broken, Connected | DisconnectPending) => EventNumber::ConnectionBroken,
            _ => return None,
        };
        Some(Reached::Lost(number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(bytes: &[u8]) -> PrivateData {
        PrivateData::from_slice(bytes).unwrap()
    }

    fn peer() -> IaAddress {
        IaAddress::default()
    }

    #[test]
    fn an_active_connect_is_established_with_the_peers_private_data() {
        let mut c = Connection::new(EpState::Unconnected, false);
        c.connect(peer(), 7);
        assert_eq!(c.state(), EpState::ActiveConnectionPending);
        assert_eq!((c.remote_conn_qual, c.remote_port), (7, 7));
        // An outcome of the passive side is stale here, and changes nothing.
        assert_eq!(c.take(ConnOutcome::AcceptError, data(b"")), None);
        assert_eq!(c.state(), EpState::ActiveConnectionPending);
        let reached = c.take(ConnOutcome::Established, data(b"welcome"));
        assert_eq!(reached, Some(Reached::Established { private_data_size: 7 }));
        assert_eq!(c.state(), EpState::Connected);
        assert_eq!(&c.private_data[..], b"welcome");
    }

    #[test]
    fn each_refusal_of_a_connect_is_its_event_and_keeps_a_peers_reason() {
        for (outcome, number) in [
            (ConnOutcome::PeerRejected, EventNumber::ConnectionPeerRejected),
            (ConnOutcome::NonPeerRejected, EventNumber::ConnectionNonPeerRejected),
            (ConnOutcome::Unreachable, EventNumber::ConnectionUnreachable),
            (ConnOutcome::TimedOut, EventNumber::ConnectionTimedOut),
        ] {
            let mut c = Connection::new(EpState::Unconnected, false);
            c.connect(peer(), 1);
            assert_eq!(c.take(outcome, data(b"no")), Some(Reached::Lost(number)));
            let kept: &[u8] = if outcome == ConnOutcome::PeerRejected { b"no" } else { b"" };
            assert_eq!(&c.private_data[..], kept);
            // The provider loses the EP with the event.
            c.lose();
            assert_eq!(c.state(), EpState::Disconnected);
        }
    }

    #[test]
    fn a_provider_ep_accepted_on_becomes_the_consumers_and_connects_with_no_private_data() {
        let mut c = Connection::new(EpState::TentativeConnectionPending, true);
        c.cr = CrHandle(crate::handle::RawHandle::from_bits(3));
        c.accept(peer(), 9);
        assert_eq!(c.state(), EpState::CompletionPending);
        assert!(!c.provider_owned());
        assert!(c.cr.is_null());
        assert_eq!(
            c.take(ConnOutcome::Established, data(b"ignored")),
            Some(Reached::Established { private_data_size: 0 })
        );
        assert_eq!(c.state(), EpState::Connected);
        assert!(c.private_data.is_empty());
    }

    #[test]
    fn an_accept_that_does_not_complete_is_lost() {
        let mut c = Connection::new(EpState::Unconnected, false);
        c.reserve(RspHandle(crate::handle::RawHandle::from_bits(5)));
        c.request_arrived();
        c.accept(peer(), 2);
        assert_eq!(
            c.take(ConnOutcome::AcceptError, data(b"")),
            Some(Reached::Lost(EventNumber::ConnectionAcceptCompletionError))
        );
    }

    #[test]
    fn a_reserved_ep_waits_for_a_request_and_is_released_unconnected() {
        let mut c = Connection::new(EpState::Unconnected, false);
        let rsp = RspHandle(crate::handle::RawHandle::from_bits(5));
        c.reserve(rsp);
        assert_eq!((c.state(), c.rsp()), (EpState::Reserved, rsp));
        c.request_arrived();
        assert_eq!(c.state(), EpState::PassiveConnectionPending);
        assert!(c.rsp().is_null());
        c.release();
        assert_eq!(c.state(), EpState::Unconnected);
    }

    #[test]
    fn a_connection_ends_by_the_peer_or_by_a_break_and_later_ends_are_stale() {
        for (pending, outcome, number) in [
            (false, ConnOutcome::Disconnected, EventNumber::ConnectionDisconnected),
            (true, ConnOutcome::Disconnected, EventNumber::ConnectionDisconnected),
            (false, ConnOutcome::Broken, EventNumber::ConnectionBroken),
            (true, ConnOutcome::Broken, EventNumber::ConnectionBroken),
        ] {
            let mut c = Connection::new(EpState::Unconnected, false);
            c.connect(peer(), 1);
            c.take(ConnOutcome::Established, data(b""));
            if pending {
                c.disconnect();
                assert_eq!(c.state(), EpState::DisconnectPending);
            }
            assert_eq!(c.take(outcome, data(b"")), Some(Reached::Lost(number)));
            c.lose();
            assert_eq!(c.take(outcome, data(b"")), None, "a second end of a lost connection");
            assert_eq!(c.state(), EpState::Disconnected);
        }
    }

    #[test]
    fn a_reset_forgets_the_peer() {
        let mut c = Connection::new(EpState::Unconnected, false);
        c.connect(peer(), 4);
        c.take(ConnOutcome::PeerRejected, data(b"busy"));
        c.lose();
        c.reset();
        assert_eq!(c.state(), EpState::Unconnected);
        assert!(c.private_data.is_empty());
        assert_eq!(c.remote_port, 0);
    }

    #[test]
    fn a_ud_ep_is_connected_by_its_first_peer_only() {
        let mut c = Connection::new(EpState::Unconnected, false);
        c.resolve_peer();
        assert_eq!(c.state(), EpState::Connected);
        c.disconnect();
        c.resolve_peer();
        assert_eq!(c.state(), EpState::DisconnectPending);
    }
}
