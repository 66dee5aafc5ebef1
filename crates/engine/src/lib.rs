//! searchd-engine
