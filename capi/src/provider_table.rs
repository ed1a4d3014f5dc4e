//! The `DAT_PROVIDER` table of a transport: `struct dat_provider` of
//! `<dat2/udat_redirection.h>`, every slot filled. `cargo xtask entries`
//! generates the slots and the table from `entries.list` into
//! `generated/slots.rs` (`cargo xtask test` checks it against the list):
//! slot n of a call hands its body argument n as an
//! [`Arg<n, _>`](crate::entry::Arg), and the slots of features udat does
//! not offer answer `DAT_NOT_IMPLEMENTED`.
#![allow(clippy::missing_safety_doc)]

use std::ptr;

use crate::entry::{not_offered, Arg};
use crate::sys::*;
use crate::transport::Transport;

include!("../generated/slots.rs");
