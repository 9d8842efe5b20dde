//! The objects of a plan the server cannot judge before the apply has created what they need:
//! what each waits for.

use std::fmt;

/// What an object waits for before the server can judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// Its namespace, which this apply creates.
    Namespace(String),
    /// Its kind, which a CustomResourceDefinition of this apply defines.
    Kind,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::Namespace(ns) => {
                write!(f, "namespace `{ns}` does not exist yet; apply creates it")
            }
            Blocker::Kind => write!(f, "its CustomResourceDefinition is created by this apply"),
        }
    }
}
