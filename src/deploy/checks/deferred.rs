//! The objects of a plan the server cannot judge before the apply has created what they need:
//! what each waits for, and how far it was checked before that.
//!
//! An object in a namespace the apply creates is sent all the same by `validate` and
//! `apply --dry-run`: the server converts it along its schema (unknown fields, wrong types)
//! before it finds the namespace missing, and mlkube then walks it along the server's OpenAPI v3
//! schema for the required fields ([`crate::deploy::checks::openapi`]). An object of a kind whose
//! CustomResourceDefinition comes with the apply is walked along that CRD's `openAPIV3Schema`
//! for its version: fields, types, required fields, allowed values. Both walks are
//! [`crate::deploy::checks::schema`]'s; what they find is reported in the server's words.
//!
//! Caveats: the server stays the authority. A real apply checks these objects once what they
//! need exists (see [`crate::deploy::checks::preflight`]); what the walks cannot see (value
//! validations, admission, webhooks) is found only then.
//!
//! Why an object is refused ([`Refusal`]) lives here, below the preflight that reports it, as the
//! walks refuse objects too.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use crate::deploy::checks::openapi::Documents;
use crate::deploy::checks::schema::{self, Depth, Schema};
use crate::deploy::inventory::plan::{Desired, Plan};

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

/// How far an object was checked before the server can judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Not at all.
    Not,
    /// By the server, against its schema (fields, types), and along its OpenAPI schema for the
    /// required fields, where it publishes one.
    ServerSchema,
    /// Along the schema of the CustomResourceDefinition in the plan.
    PlanCrd,
}

/// An object the server cannot judge yet: what it waits for, and how far it was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    pub blocker: Blocker,
    pub checked: Checked,
}

impl fmt::Display for Deferred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.blocker.fmt(f)
    }
}

/// Why an object cannot be applied as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: Refused,
    pub message: String,
}

/// Who refused an object, and for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The server rejected it.
    Rejected,
    /// Another field manager owns some of its fields (the server's answer, or mlkube's own
    /// finding for a Secret's value).
    Conflict,
    /// mlkube walked it along its schema, which the server could not do yet, and found fields
    /// the schema does not allow (see [`crate::deploy::checks::schema`]).
    Invalid,
}

impl Refusal {
    pub fn rejected(message: String) -> Refusal {
        Refusal {
            kind: Refused::Rejected,
            message,
        }
    }

    pub fn conflict(message: String) -> Refusal {
        Refusal {
            kind: Refused::Conflict,
            message,
        }
    }

    pub fn invalid(message: String) -> Refusal {
        Refusal {
            kind: Refused::Invalid,
            message,
        }
    }

    pub fn is_conflict(&self) -> bool {
        self.kind == Refused::Conflict
    }
}

/// The api-versions whose OpenAPI documents [`walk`] needs for the objects `deferred`.
pub fn api_versions<'p>(
    deferred: impl Iterator<Item = (&'p Desired, &'p Deferred)>,
) -> BTreeSet<String> {
    deferred
        .filter(|(_, d)| d.checked == Checked::ServerSchema)
        .map(|(d, _)| d.api_version.clone())
        .collect()
}

/// Walk `desired`, which the server checked as far as `deferred` says, along the schema at
/// hand: the server's OpenAPI schema of its kind (from `documents`), or the plan's CRD of its
/// kind. How far it is checked then, or why it is refused.
pub fn walk(
    plan: &Plan,
    documents: &Documents,
    desired: &Desired,
    deferred: Deferred,
) -> Result<Deferred, Refusal> {
    let (schema, depth, checked, source) = match (&deferred.blocker, deferred.checked) {
        (Blocker::Namespace(_), Checked::ServerSchema) => {
            match documents.schema_of(&desired.api_version, &desired.key.kind) {
                Some(schema) => (
                    schema,
                    Depth::Required,
                    Checked::ServerSchema,
                    "the server's OpenAPI schema",
                ),
                None => return Ok(deferred),
            }
        }
        (Blocker::Kind, Checked::Not) => match plan_crd_schema(plan, desired)? {
            Some(root) => (
                Schema {
                    root,
                    definitions: None,
                },
                Depth::Shape,
                Checked::PlanCrd,
                "the CustomResourceDefinition in the plan",
            ),
            None => return Ok(deferred),
        },
        _ => return Ok(deferred),
    };
    let errors = schema::check(schema, &desired.value, depth);
    if errors.is_empty() {
        return Ok(Deferred {
            checked,
            ..deferred
        });
    }
    let message = schema::invalid(&desired.key, &errors);
    Err(Refusal::invalid(format!(
        "{message} (checked against {source})"
    )))
}

/// The `openAPIV3Schema` of `desired`'s version in the plan's CRD of its kind; `None` when that
/// CRD gives none, refused when it does not serve that version.
fn plan_crd_schema<'p>(plan: &'p Plan, desired: &Desired) -> Result<Option<&'p Value>, Refusal> {
    let (group, version) = desired
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", &desired.api_version));
    let kind = &desired.key.kind;
    let Some(crd) = plan.crd_of(group, kind) else {
        return Ok(None);
    };
    let served = crd.value["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version && v["served"] != false);
    match served {
        Some(served) => Ok(served["schema"]["openAPIV3Schema"]
            .is_object()
            .then_some(&served["schema"]["openAPIV3Schema"])),
        None => Err(Refusal::invalid(format!(
            "the CustomResourceDefinition `{}` in the plan does not serve version `{version}` \
             of {kind}",
            crd.key.name
        ))),
    }
}
