//! What a `volumeConfigs` entry must be before anything is placed for it. The CRD checks the
//! same at admission; this checks it again, so that an entry stored before the CRD said so (or
//! through a CRD without these rules) fails alone, with a message that says what to fix, and
//! never makes the controller build a pod the API refuses, or a million of them.

use super::api::{MAX_ID_LENGTH, MAX_REPLICAS, VolumeConfig, is_directory_name};

/// Why `config` cannot be placed as written, if it cannot.
pub fn entry(config: &VolumeConfig) -> Result<(), String> {
    if !is_directory_name(&config.id) {
        return Err(format!(
            "id {:?} cannot name the directory jobs mount the volume at (/data/<id>): use at most {MAX_ID_LENGTH} ASCII letters, digits, '-', '_' and '.'",
            config.id
        ));
    }
    if config.replicas < 1 {
        return Err(format!(
            "replicas must be at least 1, got {}",
            config.replicas
        ));
    }
    if config.replicas > MAX_REPLICAS {
        return Err(format!(
            "replicas must be at most {MAX_REPLICAS} (one copy per node, and a cluster has at most {MAX_REPLICAS} nodes), got {}",
            config.replicas
        ));
    }
    if let Err(e) = config.tolerations.get() {
        return Err(format!(
            "tolerations is not a list of core/v1 Tolerations ({e}); write each as {{key, operator, value, effect, tolerationSeconds}}"
        ));
    }
    if let Some(Err(e)) = config.node_affinity.as_ref().map(|a| a.get()) {
        return Err(format!(
            "nodeAffinity is not a core/v1 NodeAffinity ({e}); write it as a pod's spec.affinity.nodeAffinity"
        ));
    }
    config
        .labels
        .iter()
        .try_for_each(|(key, value)| label(key, value))
}

/// Why `key: value` is not a label the API accepts, if it is not.
fn label(key: &str, value: &str) -> Result<(), String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) if is_subdomain(prefix) => name,
        Some(_) => {
            return Err(format!(
                "label key {key:?}: its prefix must be a lower-case DNS subdomain such as example.com"
            ));
        }
        None => key,
    };
    if !is_label_name(name) {
        return Err(format!(
            "label key {key:?}: its name must be 1 to 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
        ));
    }
    if !value.is_empty() && !is_label_name(value) {
        return Err(format!(
            "label {key}: value {value:?} must be empty or 1 to 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label's name, or a non-empty value.
fn is_label_name(text: &str) -> bool {
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=63).contains(&text.len())
        && ends(text.chars().next())
        && ends(text.chars().last())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A DNS subdomain (RFC 1123): dot-separated lower-case labels, at most 253 characters.
fn is_subdomain(text: &str) -> bool {
    let label = |part: &str| {
        let ends =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        (1..=63).contains(&part.len())
            && ends(part.chars().next())
            && ends(part.chars().last())
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    text.len() <= 253 && text.split('.').all(label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::volumes::api::Checked;

    fn ok() -> VolumeConfig {
        VolumeConfig {
            id: "digits".into(),
            replicas: 2,
            source_type: "S3-Dev".into(),
            ..VolumeConfig::default()
        }
    }

    #[test]
    fn a_sound_entry_passes() {
        let mut config = ok();
        config.labels = [("team", "ml"), ("example.com/tier", ""), ("a.b_c-d", "x.1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(entry(&config), Ok(()));
    }

    #[test]
    fn each_bad_field_is_named_with_its_fix() {
        type Change = Box<dyn Fn(&mut VolumeConfig)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|c| c.id = "x".repeat(300)), "use at most 63"),
            (
                Box::new(|c| c.id = "a/b".into()),
                "cannot name the directory",
            ),
            (
                Box::new(|c| c.replicas = 1_000_000_000_000),
                "must be at most 5000",
            ),
            (Box::new(|c| c.replicas = 0), "at least 1, got 0"),
            (
                Box::new(|c| {
                    c.tolerations = serde_json::from_value(serde_json::json!("all")).unwrap();
                }),
                "tolerations is not a list of core/v1 Tolerations",
            ),
            (
                Box::new(|c| {
                    c.node_affinity = Some(
                        serde_json::from_value(serde_json::json!({
                            "requiredDuringSchedulingIgnoredDuringExecution": "node-a"
                        }))
                        .unwrap(),
                    );
                }),
                "nodeAffinity is not a core/v1 NodeAffinity",
            ),
            (
                Box::new(|c| {
                    c.labels.insert("bad key!".into(), "x".into());
                }),
                "label key \"bad key!\"",
            ),
            (
                Box::new(|c| {
                    c.labels.insert("Example.com/x".into(), "x".into());
                }),
                "prefix must be a lower-case DNS subdomain",
            ),
            (
                Box::new(|c| {
                    c.labels.insert("team".into(), "-ml".into());
                }),
                "value \"-ml\"",
            ),
        ];
        for (change, says) in cases {
            let mut config = ok();
            change(&mut config);
            let error = entry(&config).expect_err(says);
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_wrong_shape_is_kept_as_written() {
        let written = serde_json::json!({ "id": "d", "replicas": 1, "sourceType": "NFS",
            "tolerations": [{ "key": 5 }] });
        let config: VolumeConfig = serde_json::from_value(written.clone()).unwrap();
        assert!(matches!(config.tolerations, Checked::Invalid { .. }));
        assert_eq!(serde_json::to_value(&config).unwrap(), written);
    }

    #[test]
    fn a_list_with_one_object_of_any_shape_reads_whole() {
        use crate::operator::volumes::api::{State, VolumeManager};
        let item = |name: &str, config: serde_json::Value, status: serde_json::Value| {
            serde_json::json!({ "apiVersion": "kvc.kubeflow.org/v1", "kind": "VolumeManager",
                "metadata": { "name": name }, "spec": { "volumeConfigs": [config] },
                "status": status })
        };
        let good = serde_json::json!({ "id": "d", "replicas": 1, "sourceType": "NFS" });
        let bad = serde_json::json!({ "id": "d", "replicas": 1, "sourceType": "NFS",
            "tolerations": "all", "nodeAffinity": ["node-a"] });
        let list = serde_json::json!({ "items": [
            item("good", good, serde_json::json!({ "state": "Completed" })),
            item("bad", bad, serde_json::json!({ "state": "Done", "nodesToClean": "a",
                "volumes": [{ "id": "d", "nodeAffinity": 5, "volumeSource": "x" }] })),
        ]});
        let items: Vec<VolumeManager> =
            serde_json::from_value(list["items"].clone()).expect("the list reads");
        assert_eq!(
            items[0].status.as_ref().unwrap().state,
            Some(State::Completed)
        );
        let status = items[1].status.as_ref().unwrap();
        assert_eq!((status.state, status.nodes_to_clean.len()), (None, 0));
        assert_eq!(status.volumes[0].node_affinity, None);
        let config = &items[1].spec.volume_configs[0];
        assert!(entry(config).unwrap_err().contains("tolerations"));
    }
}
