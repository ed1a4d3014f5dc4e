//! The parameters of the DAT calls, each call's in the order of its man
//! page's SYNOPSIS (or, for a call the pages lack, of its header's
//! prototype): where `DAT_INVALID_ARGn` takes its `n`.
//!
//! `<dat2/dat_error.h>` numbers a call's arguments from 1, as the pages
//! list them. A call declares its signature with [`signature!`] beside
//! the code that refuses its arguments, one variant per parameter in the
//! page's order, and refuses an argument by naming it,
//! `DatError::invalid(LmrCreate::Length)`: the number follows from the
//! order, so no refusal restates it, as the C ABI's `Arg<N, T>` carries
//! its `N` from the prototype.

/// A parameter of a DAT call.
pub(crate) trait Parameter: Copy {
    /// Its place among the call's parameters, from 1.
    fn position(self) -> u8;
}

/// One enum per DAT call, its variants the call's parameters in the
/// order of the page's SYNOPSIS; a variant's position is its place in
/// that list, from 1.
///
/// ```text
/// signature! {
///     /// dat_pz_query(3DAT)'s parameters.
///     pub(crate) enum PzQuery { PzHandle, PzParamMask, PzParam }
/// }
/// ```
macro_rules! signature {
    ($($(#[$doc:meta])* $vis:vis enum $call:ident { $($param:ident),+ $(,)? })+) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        // Every parameter of the page is listed, so that each one's
        // position follows from the order; a call refuses only some of
        // its arguments, and the others are never named.
        #[allow(dead_code)]
        // The variants are the page's names, which often share a prefix
        // (`cno_handle`, `cno_param_mask`, `cno_param`).
        #[allow(clippy::enum_variant_names)]
        $vis enum $call {
            $($param),+
        }

        impl $call {
            /// The parameter's place in the call's synopsis, from 1.
            pub(crate) const fn position(self) -> u8 {
                self as u8 + 1
            }
        }

        impl $crate::signature::Parameter for $call {
            #[inline(always)]
            fn position(self) -> u8 {
                $call::position(self)
            }
        }
    )+};
}

pub(crate) use signature;

#[cfg(test)]
mod tests {
    use super::Parameter;

    signature! {
        /// dat_pz_query(3DAT)'s parameters.
        enum PzQuery { PzHandle, PzParamMask, PzParam }
    }

    #[test]
    fn a_parameter_stands_where_the_synopsis_lists_it() {
        assert_eq!(PzQuery::PzHandle.position(), 1);
        assert_eq!(Parameter::position(PzQuery::PzParamMask), 2);
        assert_eq!(PzQuery::PzParam.position(), 3);
    }
}
