//! Events that trigger cluster-bootstrap (filled in by the bootstrap work).
