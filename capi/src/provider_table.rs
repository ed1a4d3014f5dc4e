//! The `DAT_PROVIDER` table of a transport: `struct dat_provider` of
//! `<dat2/udat_redirection.h>`, every slot filled. `cargo xtask entries`
//! generates the slots and the table from `entries.list` into
//! `generated/slots.rs` (`cargo xtask test` checks it against the list):
//! slot n of a call hands its body argument n as an
//! [`Arg<n, _>`](crate::entry::Arg), and the slots of features udat does
//! not offer answer `DAT_NOT_IMPLEMENTED`.
#![allow(clippy::missing_safety_doc)]

use std::ptr;

use crate::entry::{counters, evd, ib, not_offered, Arg};
use crate::instance::Entries;
use crate::sys::*;
use crate::transport::Transport;

include!("../generated/slots.rs");

/// `B`'s entry points for a provider that shares its state among
/// threads if `shares` ([`crate::instance::Instance::shares`]): its table,
/// the IB extension's post and counters, and the steps of `dat_evd_wait`.
pub fn entries<B: Transport>(shares: bool) -> Entries {
    Entries {
        table: if shares { table::<B, true>() } else { table::<B, false>() },
        post: Some(ib::post::<B>),
        counters: Some(counters::counters::<B>),
        evd_wait: Some(evd::evd_wait_step::<B>),
        evd_wait_abandon: Some(evd::evd_wait_abandon::<B>),
    }
}
