//! Events that trigger state-sync (filled in by the state-sync work).
