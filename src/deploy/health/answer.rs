//! Requests that another controller answers with a Secret: an object annotated
//! `mlkube.io/answered-by-secret: <name>` (a training job's request for keys of its own, which
//! the object store's model-keys container answers) is ready once the Secret of that name
//! exists in its namespace, owned by the request, and failed when a Warning event on it says
//! why it will not be, or when a Secret of that name exists that the request does not own.
//! `apply` waits for them before it writes the objects that use the answer (the jobs), so that
//! no pod starts without its Secret, and a refusal ends the apply with its reason.
//!
//! Only the Secret's metadata is read, never its values.

use serde_json::Value;

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::key::Key;

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Its Secret exists.
    Given,
    /// Not answered yet, and what it waits for.
    Awaited(String),
    /// Refused: the newest Warning event about it.
    Refused(String),
}

/// What a request still waiting says of who answers it.
const UNANSWERED: &str = " (the object store's model-keys container makes it; a store with an \
     external endpoint makes none: give such a job objectStoreCredentials)";

/// The annotation that names the Secret answering a request.
pub const ANSWERED_BY: &str = "mlkube.io/answered-by-secret";

/// The Secret that answers `object`, when it is a request.
pub fn answered_by(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][ANSWERED_BY].as_str()
}

/// Where the request `object` stands: given once its Secret exists, refused by the newest
/// Warning event about it.
pub async fn answer(cluster: &impl Cluster, key: &Key, object: &Value) -> Answer {
    let Some(secret) = answered_by(object) else {
        return Answer::Given;
    };
    let Some(secrets) = cluster.resolve("v1", "Secret") else {
        return Answer::Awaited("the server serves no Secrets".into());
    };
    let namespace = key.namespace.as_deref();
    match cluster.get(&secrets, namespace, secret).await {
        Ok(Some(found)) => made_for(&found, object),
        Ok(None) => match refusal(cluster, namespace, object).await {
            Some(why) => Answer::Refused(why),
            None => Answer::Awaited(format!(
                "waiting for the Secret {secret} that answers it{UNANSWERED}"
            )),
        },
        Err(error) => Answer::Awaited(format!("cannot read the Secret {secret}: {error}")),
    }
}

/// Whether the Secret `found` answers `request`: the store makes each answer owned by its
/// request. One owned by an earlier request of that name goes with it (Kubernetes' garbage
/// collector deletes it); one that no request of that name owns was made by somebody else and
/// is never taken for keys of this job's own.
fn made_for(found: &Value, request: &Value) -> Answer {
    let owners = found["metadata"]["ownerReferences"].as_array();
    let by_request =
        |o: &&Value| o["kind"] == "ConfigMap" && o["name"] == request["metadata"]["name"];
    let owner = owners.into_iter().flatten().find(by_request);
    let secret = found["metadata"]["name"].as_str().unwrap_or_default();
    match owner {
        Some(o) if o["uid"] == request["metadata"]["uid"] => Answer::Given,
        Some(_) => Answer::Awaited(format!(
            "the Secret {secret} of an earlier request of this name is still there; Kubernetes \
             deletes it with that request"
        )),
        None => Answer::Refused(format!(
            "the Secret {secret} exists but was not made for this job's keys (it is not owned \
             by their request): delete it, or give the job another name"
        )),
    }
}

/// The message of the newest Warning event about `object` (by its uid), if any.
async fn refusal(
    cluster: &impl Cluster,
    namespace: Option<&str>,
    object: &Value,
) -> Option<String> {
    let events = cluster.resolve("v1", "Event")?;
    let uid = &object["metadata"]["uid"];
    let about = format!("involvedObject.uid={}", uid.as_str()?);
    let listed = cluster
        .list_by_fields(&events, namespace, &about)
        .await
        .ok()?;
    newest_warning(&listed, uid)
}

fn newest_warning(events: &[Value], uid: &Value) -> Option<String> {
    let when = |e: &&Value| {
        let time = &e["lastTimestamp"];
        time.as_str()
            .or(e["eventTime"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    events
        .iter()
        .filter(|e| !uid.is_null() && e["involvedObject"]["uid"] == *uid && e["type"] == "Warning")
        .max_by_key(when)
        .and_then(|e| e["message"].as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_request_names_its_secret_by_annotation() {
        let request = json!({ "metadata": { "annotations": { ANSWERED_BY: "x-model-keys" } } });
        assert_eq!(answered_by(&request), Some("x-model-keys"));
        assert_eq!(answered_by(&json!({ "metadata": {} })), None);
    }

    #[test]
    fn only_a_secret_owned_by_the_request_answers_it() {
        let request = json!({ "metadata": { "name": "x-model-keys", "uid": "u1" } });
        let secret = |owners: Value| json!({ "metadata": { "name": "x-model-keys", "ownerReferences": owners } });
        let owner = |name: &str, uid: &str| json!({ "apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid });
        let given = secret(json!([owner("x-model-keys", "u1")]));
        assert_eq!(made_for(&given, &request), Answer::Given);
        let earlier = secret(json!([owner("x-model-keys", "u0")]));
        assert!(
            matches!(made_for(&earlier, &request), Answer::Awaited(why) if why.contains("earlier request"))
        );
        for foreign in [Value::Null, json!([owner("other", "u1")])] {
            let Answer::Refused(why) = made_for(&secret(foreign), &request) else {
                panic!("a Secret the request does not own was taken for its answer");
            };
            assert!(
                why.contains("delete it, or give the job another name"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_newest_warning_about_the_request_is_its_refusal() {
        let event = |uid: &str, kind: &str, at: &str, message: &str| json!({ "involvedObject": { "uid": uid }, "type": kind, "lastTimestamp": at, "message": message });
        let events = [
            event("u1", "Warning", "2026-12-01T10:00:00Z", "older"),
            event("u1", "Warning", "2026-12-01T10:00:05Z", "no keys: overlaps"),
            event("u1", "Normal", "2026-12-01T10:00:09Z", "not a refusal"),
            event("u2", "Warning", "2026-12-01T10:00:09Z", "another object's"),
        ];
        assert_eq!(
            newest_warning(&events, &json!("u1")).as_deref(),
            Some("no keys: overlaps")
        );
        assert_eq!(newest_warning(&events, &json!("u3")), None);
        assert_eq!(newest_warning(&events, &Value::Null), None);
    }
}
