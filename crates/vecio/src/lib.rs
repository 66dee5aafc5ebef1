//! searchd-vecio
