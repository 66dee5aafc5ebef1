//! searchd-load
