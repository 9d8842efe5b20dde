//! The identity of an object on the cluster: group, kind, namespace and name.

use std::fmt;

use serde_json::Value;

/// The identity of an object: group, kind, namespace and name (the version is not identity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Key {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Key {
    /// The key of an object as the API returns it or as it was rendered.
    pub fn of(value: &Value) -> Option<Key> {
        let group = crate::render::manifest::api_group(value["apiVersion"].as_str()?);
        Some(Key {
            group: group.to_string(),
            kind: value["kind"].as_str()?.to_string(),
            namespace: value["metadata"]["namespace"].as_str().map(str::to_string),
            name: value["metadata"]["name"].as_str()?.to_string(),
        })
    }

    /// `Kind.group` (or `Kind` for the core group): the ApplySet spelling of a group-kind.
    pub fn group_kind(&self) -> String {
        group_kind(&self.group, &self.kind)
    }
}

/// `Kind.group`, or `Kind` for the core group.
pub fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.group_kind(), self.name),
            None => write!(f, "{} {}", self.group_kind(), self.name),
        }
    }
}
