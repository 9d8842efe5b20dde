//! What an environment has on the cluster and what it will have: the inventory of its members
//! (the ApplySet, [`applyset`]), whose each object is and what an environment may do with it
//! ([`ownership`]), the fields an adopt takes over ([`adopt`]), the live objects a render finds
//! that are not members yet ([`live`]), the plan, the rendered objects keyed, tiered and
//! labelled as members ([`plan`]), and the record of the last apply on the inventory
//! ([`last_apply`]).
//!
//! Above the cluster seam, which it reads and writes through; beneath the checks and the verbs,
//! which it knows nothing of.

pub mod adopt;
pub mod applyset;
pub mod last_apply;
pub mod live;
pub mod ownership;
pub mod plan;
