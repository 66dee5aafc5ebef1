//! searchd-server
