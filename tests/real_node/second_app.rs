//! docs/local-cluster.md's second app on the same cluster, run as written: the lines of its
//! block, in bash, with the real-node tests' own app in the place of the quickstart's (the
//! first app, whose operator and gateway the second shares). The second app's namespace is the
//! page's, `team-b`; the block's last line shows how the answer through the gateway begins.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::platform::{self, assert_success};
use crate::support::{self, AppsCleanup, NamespaceCleanup};

const PAGE: &str = "docs/local-cluster.md";
/// The paragraph the block follows.
const SECTION: &str = "**A second app on the same cluster**";
/// How the block names the first app: the quickstart's.
const QUICKSTART_APP: &str = r#""${TMPDIR:-/tmp}/mlkube-quickstart""#;
const NAMESPACE: &str = "team-b";

/// The block's lines (its four-space indent taken off): those that change the first app, the
/// rest, and the beginning of the output the last line shows (`# {...` ending in `...`).
struct Recipe {
    first_app: String,
    second_app: String,
    shown: String,
}

fn recipe() -> Recipe {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE))
        .expect("read the page");
    let after = &page[page.find(SECTION).expect("the page has the section")..];
    let mut lines: Vec<&str> = (after.lines())
        .skip_while(|l| !l.starts_with("    "))
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    while lines.last() == Some(&"") {
        lines.pop();
    }
    let (first, rest): (Vec<&str>, Vec<&str>) =
        (lines.iter()).partition(|l| l.starts_with(&format!("mlkube --app {QUICKSTART_APP}")));
    let shown = (rest.last())
        .and_then(|l| l.strip_prefix("# "))
        .and_then(|l| l.strip_suffix("..."))
        .expect("the block ends with the output it shows, `# ...`");
    Recipe {
        first_app: first.join("\n"),
        second_app: rest.join("\n"),
        shown: shown.to_string(),
    }
}

/// `lines` run by bash in `dir`, stopping at the first that fails, the built `mlkube` first on
/// PATH.
fn bash(dir: &Path, lines: &str) -> Output {
    let binary = Path::new(env!("CARGO_BIN_EXE_mlkube"));
    let path = std::env::join_paths(
        std::iter::once(binary.parent().expect("a directory").to_path_buf()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ),
    )
    .expect("a PATH");
    Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{lines}")])
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", support::kubeconfig_path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("bash runs")
}

/// The page's namespace gone, from a run before that did not finish.
async fn without_namespace() {
    let namespaces = Api::<Namespace>::all(support::client().await);
    let _ = namespaces.delete(NAMESPACE, &Default::default()).await;
    support::eventually(
        "the namespace team-b of an earlier run to be gone",
        Duration::from_secs(120),
        || async {
            namespaces
                .get_opt(NAMESPACE)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_second_app_trains_and_serves_on_the_first_apps_operator_and_gateway_as_the_page_says() {
    std::env::var("MLKUBE_GATEWAY_URL").expect(
        "MLKUBE_GATEWAY_URL is set: eval \"$(cluster/local-cluster.sh env)\" of a real-node cluster",
    );
    let first = platform::app();
    let recipe = recipe();
    without_namespace().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let _namespace = NamespaceCleanup(NAMESPACE.to_string());
    let _second = AppsCleanup(vec![dir.path().join(NAMESPACE)]);

    let first_quoted = format!("'{}'", first.to_str().expect("a UTF-8 path"));
    let first_lines = recipe.first_app.replace(QUICKSTART_APP, &first_quoted);
    // The first app's params are the other tests' too: edited one at a time. Its gateway
    // admits every namespace's routes from the start (platform.rs), so these lines change
    // nothing there while the other tests send traffic through it.
    let edited = platform::editing(|| bash(dir.path(), &first_lines));
    assert_success("the first app's lines", &edited);
    let second = bash(dir.path(), &recipe.second_app);
    assert_success("the second app's lines", &second);

    let answer = String::from_utf8_lossy(&second.stdout);
    let last = answer.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&recipe.shown),
        "the model answers through the gateway as the page shows ({}), but said: {answer}",
        recipe.shown
    );
}
