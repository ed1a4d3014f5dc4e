//! `UDAT_DEBUG`: say on stderr why a call failed where the DAT return
//! code alone leaves a user guessing, as OFA's `DAPL_DBG_TYPE` does: an
//! IA that would not open, a connection refused or lost, a DTO that
//! completed with an error or was flushed. Set to anything but empty or
//! `0`, it is read once. Only the ordinary calls speak; a lane never
//! fails, so the data path pays nothing for it.

use std::fmt;
use std::sync::OnceLock;

/// The variable that turns the messages on.
pub const VARIABLE: &str = "UDAT_DEBUG";

/// Whether `value`, the variable's, turns the messages on.
fn turns_on(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether the messages are on.
pub fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| turns_on(std::env::var_os(VARIABLE).as_deref()))
}

/// Say `why` on stderr if the messages are on.
#[cold]
#[inline(never)]
pub fn say(why: fmt::Arguments<'_>) {
    if on() {
        eprintln!("udat: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn only_a_value_that_is_not_empty_or_zero_turns_the_messages_on() {
        assert!(!turns_on(None));
        assert!(!turns_on(Some(OsStr::new(""))));
        assert!(!turns_on(Some(OsStr::new("0"))));
        assert!(turns_on(Some(OsStr::new("1"))));
        assert!(turns_on(Some(OsStr::new("all"))));
    }
}
