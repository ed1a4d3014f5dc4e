//! udat
