//! The API server's OpenAPI v3 documents, as far as the checks before an apply need them: the
//! schema of a kind the server serves, for walking an object along it ([`super::schema`])
//! when the server cannot judge the object yet (its namespace does not exist).
//!
//! Each group-version's document (`/openapi/v3/apis/<group>/<version>`, `/openapi/v3/api/v1`)
//! is read once per run, through [`Cluster::openapi`], concurrently, and only for the
//! group-versions asked for. A group-version the server publishes no document for is left out: its kinds are not
//! walked.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use serde_json::{Map, Value};

use crate::deploy::checks::schema::Schema;
use crate::deploy::cluster::{CONCURRENCY, Cluster};

/// The schemas of the group-versions read, by `apiVersion`.
#[derive(Debug, Default)]
pub struct Documents {
    /// `components.schemas` of each group-version's document.
    schemas: BTreeMap<String, Map<String, Value>>,
}

impl Documents {
    /// Read the documents of `api_versions` (`v1`, `apps/v1`, ...).
    pub async fn fetch(
        cluster: &impl Cluster,
        api_versions: &BTreeSet<String>,
    ) -> Result<Documents, kube::Error> {
        // Collected first: a lazy iterator of futures borrowing `api_versions` would make the
        // caller's future not `Send` for every lifetime.
        let reads: Vec<_> = api_versions
            .iter()
            .map(|api_version| async move { (api_version, cluster.openapi(api_version).await) })
            .collect();
        let answers: Vec<_> = futures::stream::iter(reads)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut documents = Documents::default();
        for (api_version, answer) in answers {
            let Some(mut document) = answer? else {
                continue;
            };
            if let Value::Object(schemas) = document["components"]["schemas"].take() {
                documents.schemas.insert(api_version.clone(), schemas);
            }
        }
        Ok(documents)
    }

    /// The schema of `kind` in `api_version`, with the definitions its references point into;
    /// `None` when no document read describes it.
    pub fn schema_of(&self, api_version: &str, kind: &str) -> Option<Schema<'_>> {
        let definitions = self.schemas.get(api_version)?;
        let root = definitions
            .values()
            .find(|schema| describes(schema, api_version, kind))?;
        Some(Schema {
            root,
            definitions: Some(definitions),
        })
    }
}

/// Whether `schema` is the one of `kind` in `api_version`.
fn describes(schema: &Value, api_version: &str, kind: &str) -> bool {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    schema["x-kubernetes-group-version-kind"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|gvk| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_kind_is_found_by_its_group_version_and_kind_only() {
        let mut documents = Documents::default();
        let schemas = json!({
            "io.k8s.api.apps.v1.Deployment": {"type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}]},
            "io.k8s.api.apps.v1.DeploymentSpec": {"type": "object"},
        });
        let Value::Object(schemas) = schemas else {
            unreachable!("an object literal")
        };
        documents.schemas.insert("apps/v1".into(), schemas);
        let found = documents.schema_of("apps/v1", "Deployment").expect("found");
        assert_eq!(
            found.root["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(documents.schema_of("apps/v1", "StatefulSet").is_none());
        assert!(documents.schema_of("v1", "Deployment").is_none());
        assert!(documents.schema_of("apps/v2", "Deployment").is_none());
    }
}
