//! What a bootstrap applies, decided before any cluster is touched: the plan of objects in order
//! ([`plan`], what `cellbridge bootstrap --dry-run` prints) and Flux's Git secret built from the
//! credentials cellbridge is given ([`gitsecret`]), or, for a Flux Operator cell, the operator and its
//! FluxInstance ([`operator`]); and, after the apply, whether Flux took over
//! or why not ([`confirm`]), and where that is recorded ([`record`]).

pub mod confirm;
pub mod gitsecret;
pub mod operator;
pub mod plan;
pub mod record;
