//! What a bootstrap applies, decided before any cluster is touched: the plan of objects in order
//! ([`plan`], what `cellbridge bootstrap --dry-run` prints) and Flux's Git secret built from the
//! credentials cellbridge is given ([`gitsecret`]); and, after the apply, whether Flux took over
//! or why not ([`confirm`]), and where that is recorded ([`record`]).

pub mod confirm;
pub mod gitsecret;
pub mod plan;
pub mod record;
