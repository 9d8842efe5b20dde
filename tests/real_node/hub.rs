//! The notebook hub on the real node, as a user meets it: an app of the test's own made by
//! `mlkube init`, the hub's params in its `local` environment pointing at the notebook-hub image
//! the node holds (as `cluster/quickstart.sh` sets them), `mlkube apply local -c notebook-hub`;
//! then a user logs in with `local`'s `dummy` authenticator, is refused options the hub does
//! not offer through its REST API, spawns a notebook from the options form, uses it through
//! configurable-http-proxy (JupyterLab after the OAuth round with the hub, the REST API, a file
//! saved in the home directory, on the user's own volume, a claim of the default StorageClass) and
//! stops it again. With `firstuse`, the component's default, a user's first password is theirs
//! alone, also after the hub restarts; with `allowedUsers`, only the names listed log in; with
//! `invitationsSecret`, a new name only with its invitation.
//!
//! Pod IPs are not reachable from the host, so the test is a browser that talks to the hub's
//! public Service through the API server's service proxy. That proxy drops the `Authorization`
//! header (the API server consumed it), so the user is identified by the hub's cookies, as in a
//! browser, never by an API token.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::client::Body;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::platform::{assert_success, create_secret, mlkube, set_param};
use crate::support::{self, TestNamespace};

const HUB: &str = "notebook-hub";
const IMAGE: &str = "mlkube/notebook-hub";
const TAG: &str = env!("CARGO_PKG_VERSION");
const USER: &str = "ada";
const HUB_LABEL: &str = "app.kubernetes.io/name=notebook-hub";
const NOTEBOOK_LABEL: &str = "app.kubernetes.io/name=notebook";

/// The hub's app and namespace, both removed when the test ends (also when it fails).
struct HubApp {
    namespace: TestNamespace,
    dir: tempfile::TempDir,
}

impl HubApp {
    /// `mlkube init`, the hub's params for the node's image, and `mlkube apply`, which waits
    /// until the hub is Ready.
    async fn deploy() -> Self {
        Self::deploy_with(&[], None).await
    }

    /// [`HubApp::deploy`], with more params of the hub and, with `profile`, a profile of that
    /// name (its namespace too) that lets the hub in.
    async fn deploy_with(params: &[(&str, &str)], profile: Option<&str>) -> Self {
        Self::deploy_in(TestNamespace::new("hub").await, params, profile).await
    }

    /// [`HubApp::deploy_with`] in a `namespace` the test made (and may have put objects in).
    async fn deploy_in(
        namespace: TestNamespace,
        params: &[(&str, &str)],
        profile: Option<&str>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let app: PathBuf = dir.path().join("hub-app");
        let path = app.to_str().expect("a UTF-8 path");
        let init = mlkube(dir.path(), &["init", path, "--namespace", &namespace.name]);
        assert_success("mlkube init", &init);
        let image = format!("{IMAGE}:{TAG}");
        let notebook_images = json!([image]).to_string();
        let node_images = [
            ("image", IMAGE),
            ("tag", TAG),
            ("proxyImage", &image),
            ("notebookImages", &notebook_images),
        ];
        set_params(&app, &node_images);
        set_params(&app, params);
        let mut components = vec!["-c", HUB];
        let hub = format!("notebookHub={}/{HUB}", namespace.name);
        let owner = format!("owner={}", profile.unwrap_or_default());
        if let Some(profile) = profile {
            let add = [
                "component",
                "add",
                "profile",
                profile,
                "--param",
                &owner,
                "--param",
                &hub,
            ];
            assert_success("mlkube component add profile", &mlkube(&app, &add));
            components.extend(["-c", profile]);
        }
        let apply = mlkube(
            &app,
            &[&["apply", "local", "--timeout", "3m"], &components[..]].concat(),
        );
        assert_success("mlkube apply local -c notebook-hub", &apply);
        HubApp { namespace, dir }
    }

    /// The hub's `params` changed in `local` and applied again: its config changed, so `apply`
    /// waits for the hub's next pod.
    fn reapply(&self, params: &[(&str, &str)]) {
        let app = self.dir.path().join("hub-app");
        set_params(&app, params);
        let apply = mlkube(&app, &["apply", "local", "--timeout", "3m", "-c", HUB]);
        assert_success("mlkube apply local -c notebook-hub, again", &apply);
    }
}

/// `mlkube param set` of each of the hub's `params` in the app's `local` environment.
fn set_params(app: &Path, params: &[(&str, &str)]) {
    for (param, value) in params {
        set_param(app, HUB, param, value, Some("local"));
    }
}

/// A user's browser, reduced to what the hub asks of one: cookies kept by name and path and
/// sent where their path applies, the `_xsrf` cookie echoed in forms and headers, and redirects
/// followed by hand (the API server rewrites their `Location` under its proxy path).
struct Browser {
    client: Client,
    /// The service proxy's path to the hub's public Service; hub paths are appended to it.
    prefix: String,
    cookies: BTreeMap<(String, String), String>,
}

/// What came back for one request.
struct Reply {
    status: StatusCode,
    location: Option<String>,
    body: String,
}

impl Browser {
    fn new(client: Client, namespace: &str) -> Self {
        Browser {
            client,
            prefix: format!("/api/v1/namespaces/{namespace}/services/http:{HUB}-public:80/proxy"),
            cookies: BTreeMap::new(),
        }
    }

    async fn get(&mut self, path: &str) -> Reply {
        self.send(Method::GET, path, None, &[]).await
    }

    /// POST a form with the `_xsrf` token that applies to `path`.
    async fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let xsrf = self.xsrf(path);
        let mut all = vec![("_xsrf", xsrf.as_str())];
        all.extend_from_slice(fields);
        let body = (
            "application/x-www-form-urlencoded",
            form_encode(&all).into_bytes(),
        );
        self.send(Method::POST, path, Some(body), &[]).await
    }

    /// GET `path`, following redirects within the hub; the paths visited and the last reply.
    async fn follow(&mut self, path: &str) -> (Vec<String>, Reply) {
        let mut visited = vec![path.to_owned()];
        while visited.len() <= 10 {
            let reply = self.get(visited.last().expect("a path")).await;
            match &reply.location {
                Some(location) if reply.status.is_redirection() => {
                    visited.push(self.hub_path(location));
                }
                _ => return (visited, reply),
            }
        }
        panic!("more than 10 redirects: {visited:?}")
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.prefix))
            .header("Cookie", self.cookie_header(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (content_type, bytes) = body.unwrap_or(("text/plain", Vec::new()));
        let request = request
            .header("Content-Type", content_type)
            .body(Body::from(bytes))
            .expect("a valid request");
        let response = self
            .client
            .send(request)
            .await
            .unwrap_or_else(|e| panic!("{method} {path} through the service proxy: {e}"));
        let (parts, body) = response.into_parts();
        for set in parts.headers.get_all("set-cookie") {
            self.store_cookie(set.to_str().expect("an ASCII Set-Cookie header"));
        }
        let bytes = body.collect_bytes().await.expect("the reply's body");
        Reply {
            status: parts.status,
            location: parts
                .headers
                .get("location")
                .map(|l| l.to_str().expect("an ASCII Location").to_owned()),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// The hub path a redirect points to, without the proxy path the API server put before it.
    fn hub_path(&self, location: &str) -> String {
        match location.find(&self.prefix) {
            Some(at) => location[at + self.prefix.len()..].to_owned(),
            None if location.starts_with('/') => location.to_owned(),
            None => panic!("a redirect away from the hub: {location}"),
        }
    }

    fn store_cookie(&mut self, header: &str) {
        let mut attributes = header.split(';').map(str::trim);
        let Some((name, value)) = attributes.next().and_then(|pair| pair.split_once('=')) else {
            return;
        };
        let attributes: Vec<(String, &str)> = attributes
            .filter_map(|a| a.split_once('='))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let path = attributes
            .iter()
            .find(|(k, _)| k == "path")
            .map_or("/", |(_, v)| v);
        let key = (name.to_owned(), path.to_owned());
        let cleared = attributes.iter().any(|(k, v)| k == "max-age" && *v == "0");
        if value.is_empty() || cleared {
            self.cookies.remove(&key);
        } else {
            self.cookies.insert(key, value.to_owned());
        }
    }

    fn cookie_header(&self, path: &str) -> String {
        self.cookies
            .iter()
            .filter(|((_, cookie_path), _)| path.starts_with(cookie_path.as_str()))
            .map(|((name, _), value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The `_xsrf` cookie with the most specific path that applies to `path`.
    fn xsrf(&self, path: &str) -> String {
        self.cookies
            .iter()
            .filter(|((name, cookie_path), _)| {
                name == "_xsrf" && path.starts_with(cookie_path.as_str())
            })
            .max_by_key(|((_, cookie_path), _)| cookie_path.len())
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("no _xsrf cookie for {path}; cookies: {:?}", self.cookies))
    }
}

fn form_encode(fields: &[(&str, &str)]) -> String {
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The login page, then its form with any password (the `dummy` authenticator).
async fn log_in(browser: &mut Browser, user: &str) {
    log_in_with(browser, user, "any").await;
}

/// The login page, then its form with `password`, which lets the user in.
async fn log_in_with(browser: &mut Browser, user: &str, password: &str) {
    let login = try_log_in(browser, user, password).await;
    assert!(
        login.status.is_redirection(),
        "logging in as {user} redirects into the hub, got {}: {}",
        login.status,
        login.body
    );
}

/// The login page, then its form with `password`; the hub's answer to the form.
async fn try_log_in(browser: &mut Browser, user: &str, password: &str) -> Reply {
    let page = browser.get("/hub/login").await;
    assert_eq!(page.status, StatusCode::OK, "the login page: {}", page.body);
    browser
        .post_form("/hub/login", &[("username", user), ("password", password)])
        .await
}

/// A login refused with the hub's 403 and the page's message saying why.
async fn assert_refused(browser: &mut Browser, user: &str, password: &str, why: &str) {
    let login = try_log_in(browser, user, password).await;
    let what = format!("logging in as {user} with {password:?}");
    assert_refusal(&login, StatusCode::FORBIDDEN, why, &what);
}

/// `reply`, the hub's answer to `what`, is a refusal with `status` that says `why`.
fn assert_refusal(reply: &Reply, status: StatusCode, why: &str, what: &str) {
    assert_eq!(reply.status, status, "{what} is refused: {}", reply.body);
    assert!(
        reply.body.contains(why),
        "the refusal of {what} says {why:?}: {}",
        reply.body
    );
}

/// The REST API takes a user's options as JSON, past the form: the hub checks them as it
/// checks the form's, so nobody runs an image it does not offer or asks for more than it allows.
async fn refuse_options_the_hub_does_not_offer(browser: &mut Browser, user: &str) {
    let server = format!("/hub/api/users/{user}/server");
    for (options, reason) in [
        (
            json!({ "image": "busybox:latest" }),
            "image 'busybox:latest' is not offered",
        ),
        (json!({ "gpus": 1 }), "gpus must be at most 0"),
        (json!({ "cpu": "-1" }), "cpu must be more than 0"),
    ] {
        let xsrf = browser.xsrf(&server);
        let body = ("application/json", options.to_string().into_bytes());
        let reply = browser
            .send(Method::POST, &server, Some(body), &[("X-XSRFToken", &xsrf)])
            .await;
        let what = format!("starting a server with {options}");
        assert_refusal(&reply, StatusCode::BAD_REQUEST, reason, &what);
    }
}

/// The options form, submitted with small requests for the shared node, and the spawn awaited.
async fn spawn_from_form(browser: &mut Browser, user: &str, image: &str) {
    let form = browser.get(&format!("/hub/spawn/{user}")).await;
    assert_eq!(
        form.status,
        StatusCode::OK,
        "the options form: {}",
        form.body
    );
    assert!(
        form.body.contains(&format!("<option value=\"{image}\">")),
        "the form offers {image}: {}",
        form.body
    );
    let fields = [("image", image), ("cpu", "0.1"), ("memory", "0.25")];
    let spawn = browser
        .post_form(&format!("/hub/spawn/{user}"), &fields)
        .await;
    assert!(
        spawn.status.is_redirection(),
        "submitting the form starts the server, got {}: {}",
        spawn.status,
        spawn.body
    );
    wait_until_ready(browser, user).await;
}

/// The server's progress stream, which ends when the server is ready or has failed.
async fn wait_until_ready(browser: &mut Browser, user: &str) {
    let progress = format!("/hub/api/users/{user}/server/progress");
    let events = tokio::time::timeout(Duration::from_secs(90), browser.get(&progress))
        .await
        .expect("the server is ready or failed within 90 s");
    let last = events
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .next_back()
        .unwrap_or_else(|| panic!("no progress events: {}", events.body));
    assert_eq!(last["ready"], true, "the spawn's last event: {last}");
}

/// What KubeSpawner made of the form: the user's one pod, from the offered image, with the
/// form's requests, as uid 1000 and the notebooks' ServiceAccount.
fn assert_notebook_pod(pods: &[Pod], image: &str) {
    assert_eq!(pods.len(), 1, "one notebook pod: {pods:?}");
    let spec = pods[0].spec.as_ref().expect("a pod has a spec");
    let container = &spec.containers[0];
    assert_eq!(container.image.as_deref(), Some(image));
    let requests = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let cpu = requests.and_then(|r| r.get("cpu")).map(|q| q.0.as_str());
    assert_eq!(
        cpu,
        Some("100m"),
        "the form's CPU is the request: {container:?}"
    );
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("notebook-hub-notebook")
    );
    let user = container
        .security_context
        .as_ref()
        .and_then(|c| c.run_as_user);
    assert_eq!(
        user,
        Some(1000),
        "the notebook runs as jovyan: {container:?}"
    );
    let group = spec.security_context.as_ref().and_then(|p| p.fs_group);
    assert_eq!(
        group,
        Some(100),
        "volumes belong to the users group: {spec:?}"
    );
}

/// The user's server through the proxy: a page view makes the OAuth round with the hub (the
/// server redeems the code at the hub's Service), an API call answers with the user's cookie,
/// and a file saved in the home directory proves the server can write there as uid 1000.
async fn use_the_notebook(browser: &mut Browser, user: &str) {
    let (visited, lab) = browser.follow(&format!("/user/{user}/lab")).await;
    assert_eq!(
        lab.status,
        StatusCode::OK,
        "JupyterLab after {visited:?}: {}",
        lab.body
    );
    assert!(
        lab.body.contains("JupyterLab"),
        "JupyterLab's page: {}",
        lab.body
    );
    let callback = format!("/user/{user}/oauth_callback?");
    assert!(
        visited.iter().any(|path| path.starts_with(&callback)),
        "the server learned who the user is from the hub (OAuth): {visited:?}"
    );

    let status = browser.get(&format!("/user/{user}/api/status")).await;
    assert_eq!(
        status.status,
        StatusCode::OK,
        "the server's status: {}",
        status.body
    );
    let status: Value = serde_json::from_str(&status.body).expect("the status is JSON");
    assert!(
        status["started"].is_string(),
        "the server says when it started: {status}"
    );

    let file = format!("/user/{user}/api/contents/hello.txt");
    let xsrf = browser.xsrf(&file);
    let content = json!({ "type": "file", "format": "text", "content": "saved by the test" });
    let body = ("application/json", content.to_string().into_bytes());
    let put = browser
        .send(Method::PUT, &file, Some(body), &[("X-XSRFToken", &xsrf)])
        .await;
    assert_eq!(
        put.status,
        StatusCode::CREATED,
        "saving a file in the home directory: {}",
        put.body
    );
    let saved = browser.get(&format!("{file}?content=1")).await;
    let saved: Value = serde_json::from_str(&saved.body).expect("the file's model is JSON");
    assert_eq!(
        saved["content"], "saved by the test",
        "the file reads back: {saved}"
    );
}

/// Stopping the server from the hub deletes the user's pod and takes the route off the proxy.
async fn stop_the_notebook(browser: &mut Browser, client: &Client, namespace: &str, user: &str) {
    let server = format!("/hub/api/users/{user}/server");
    let xsrf = browser.xsrf(&server);
    let stop = browser
        .send(Method::DELETE, &server, None, &[("X-XSRFToken", &xsrf)])
        .await;
    assert!(
        stop.status.is_success(),
        "stopping the server is accepted, got {}: {}",
        stop.status,
        stop.body
    );
    support::eventually(
        "the notebook pod to be deleted",
        Duration::from_secs(60),
        || async {
            pods(client, namespace, NOTEBOOK_LABEL)
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    let gone = browser.get(&format!("/user/{user}/api/status")).await;
    assert_ne!(
        gone.status,
        StatusCode::OK,
        "the stopped server no longer answers: {}",
        gone.body
    );
}

/// A hub whose database is in an emptyDir forgets every server when it restarts: it stops them
/// as it shuts down, or their pods would run on with no route to them until someone deletes
/// them by hand.
async fn restart_the_hub_with_a_server_running(
    browser: &mut Browser,
    client: &Client,
    namespace: &str,
    user: &str,
) {
    let server = format!("/hub/api/users/{user}/server");
    let xsrf = browser.xsrf(&server);
    let options = json!({ "cpu": "0.1", "memory": "0.25" }).to_string();
    let body = ("application/json", options.into_bytes());
    let start = browser
        .send(Method::POST, &server, Some(body), &[("X-XSRFToken", &xsrf)])
        .await;
    assert!(
        start.status.is_success(),
        "starting the server again through the REST API, got {}: {}",
        start.status,
        start.body
    );
    wait_until_ready(browser, user).await;
    delete_the_hub_pod(client, namespace).await;
    support::eventually(
        "the restarting hub to delete the notebook pod",
        Duration::from_secs(60),
        || async {
            pods(client, namespace, NOTEBOOK_LABEL)
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

/// The hub's pod deleted, and its StatefulSet's next one Ready.
async fn restart_the_hub(client: &Client, namespace: &str) {
    let old = delete_the_hub_pod(client, namespace).await;
    support::eventually(
        "the hub's next pod to be Ready",
        Duration::from_secs(180),
        || async {
            let ready = pods(client, namespace, HUB_LABEL)
                .await
                .into_iter()
                .any(|pod| {
                    let conditions = pod.status.and_then(|s| s.conditions).unwrap_or_default();
                    pod.metadata.uid.as_ref() != Some(&old)
                        && conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                });
            ready.then_some(())
        },
    )
    .await;
}

/// Deletes the hub's pod (its StatefulSet makes the next); returns the deleted pod's uid.
async fn delete_the_hub_pod(client: &Client, namespace: &str) -> String {
    let hub = pods(client, namespace, HUB_LABEL).await;
    let (name, uid) = (&hub[0].metadata.name, &hub[0].metadata.uid);
    Api::<Pod>::namespaced(client.clone(), namespace)
        .delete(
            name.as_deref().expect("the hub pod's name"),
            &Default::default(),
        )
        .await
        .expect("delete the hub's pod");
    uid.clone().expect("the hub pod's uid")
}

async fn pods(client: &Client, namespace: &str, label: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(label))
        .await
        .expect("list pods")
        .items
}

/// The user's own volume (KubeSpawner's claim, of the default StorageClass) is bound, so the
/// home directory the notebook saves into is on it.
async fn assert_user_volume_bound(client: &Client, namespace: &str) {
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let claim = claims
        .get(&format!("claim-{USER}"))
        .await
        .expect("KubeSpawner made the user's claim");
    let phase = claim.status.and_then(|s| s.phase);
    assert_eq!(phase.as_deref(), Some("Bound"), "the user's volume binds");
}

/// With `userNamespaces`, a user's notebook runs in their profile's namespace as the profile's
/// ServiceAccount, never beside the platform's identities; the hub may spawn there only because
/// the profile binds the hub's ClusterRole in it.
#[tokio::test]
async fn a_users_notebook_runs_in_their_profile_as_its_service_account() {
    // KubeSpawner keeps a name of lower-case letters and digits as it is: the profile's name.
    let user = format!("ada{}", std::process::id());
    let app = HubApp::deploy_with(&[("userNamespaces", "true")], Some(&user)).await;
    let _profile = support::NamespaceCleanup(user.clone());
    let namespace = app.namespace.name.as_str();
    let client = support::client().await;
    let image = format!("{IMAGE}:{TAG}");
    let mut browser = Browser::new(client.clone(), namespace);
    log_in(&mut browser, &user).await;
    spawn_from_form(&mut browser, &user, &image).await;
    assert!(pods(&client, namespace, NOTEBOOK_LABEL).await.is_empty());
    let notebooks = pods(&client, &user, NOTEBOOK_LABEL).await;
    assert_eq!(
        notebooks.len(),
        1,
        "one notebook pod in the profile: {notebooks:?}"
    );
    let spec = notebooks[0].spec.as_ref().expect("a pod has a spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("default-editor"));
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &user);
    assert!(
        claims.get(&format!("claim-{user}")).await.is_ok(),
        "the user's volume is there too"
    );
    stop_the_notebook(&mut browser, &client, &user, &user).await;
}

/// With `firstuse` (the hub's default, and dev's), a name's first login sets its password:
/// nobody logs in under that name with another one, before or after the hub restarts (the
/// passwords are on the hub's volume), and a new name's too short password is refused, saying so.
#[tokio::test]
async fn a_users_first_password_is_theirs_alone_across_a_restart_of_the_hub() {
    let params = [("authenticator", "firstuse"), ("hubDbStorage", "1Gi")];
    let app = HubApp::deploy_with(&params, None).await;
    let namespace = app.namespace.name.as_str();
    let client = support::client().await;
    let password = "correct horse battery staple";
    let (invalid, short) = ("Invalid username or password", "Password too short");
    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, USER, password).await;
    let mut other = Browser::new(client.clone(), namespace);
    assert_refused(&mut other, USER, "another password", invalid).await;
    assert_refused(&mut other, "newcomer", "short", short).await;

    restart_the_hub(&client, namespace).await;
    assert_refused(&mut other, USER, "another password", invalid).await;
    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, USER, password).await;
}

/// With `allowedUsers` only the names listed log in. A stranger refused under a name sets no
/// password for it (FirstUseAuthenticator would store one before the hub checks the list), so
/// once the name is listed its owner's own first password is theirs; and a name taken out of
/// the list is refused, though its password is right and the hub's database still holds it.
#[tokio::test]
async fn only_the_names_listed_log_in_and_a_stranger_claims_none() {
    let (listed, later) = (r#"["ada"]"#, r#"["grace"]"#);
    let params = [
        ("authenticator", "firstuse"),
        ("hubDbStorage", "1Gi"),
        ("allowedUsers", listed),
    ];
    let app = HubApp::deploy_with(&params, None).await;
    let namespace = app.namespace.name.as_str();
    let client = support::client().await;
    let invalid = "Invalid username or password";
    let (ada, grace) = ("ada's own password", "grace's own password");
    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, USER, ada).await;
    let mut stranger = Browser::new(client.clone(), namespace);
    assert_refused(&mut stranger, "grace", "a stranger's password", invalid).await;

    app.reapply(&[("allowedUsers", later)]);
    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, "grace", grace).await;
    let mut removed = Browser::new(client.clone(), namespace);
    assert_refused(&mut removed, USER, ada, invalid).await;
}

/// With `invitationsSecret` a name nobody has logged in under yet is not its first comer's: its
/// first login must give the invitation the administrator put in that Secret (FirstUse alone
/// would store a stranger's password, and the name's owner would be refused), the invitation
/// stays the user's password until they change it, and a name with no invitation is claimed
/// by nobody.
#[tokio::test]
async fn a_new_name_logs_in_first_only_with_the_invitation_it_was_given() {
    let namespace = TestNamespace::new("hub").await;
    let client = support::client().await;
    let invitation = "ada's invitation";
    let invitations = json!({ USER: invitation });
    create_secret(&client, &namespace.name, "hub-invitations", invitations).await;
    let params = [
        ("authenticator", "firstuse"),
        ("hubDbStorage", "1Gi"),
        ("invitationsSecret", "hub-invitations"),
    ];
    let app = HubApp::deploy_in(namespace, &params, None).await;
    let namespace = app.namespace.name.as_str();
    let invalid = "Invalid username or password";
    let mut stranger = Browser::new(client.clone(), namespace);
    assert_refused(&mut stranger, USER, "a stranger's password", invalid).await;
    assert_refused(&mut stranger, "grace", "a stranger's password", invalid).await;

    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, USER, invitation).await;
    let own = "ada's own password";
    change_password(&mut user, own).await;
    assert_refused(&mut stranger, USER, invitation, invalid).await;
    let mut user = Browser::new(client.clone(), namespace);
    log_in_with(&mut user, USER, own).await;
}

/// The logged-in user sets a new password on FirstUse's change-password page.
async fn change_password(browser: &mut Browser, password: &str) {
    let path = "/hub/auth/change-password";
    let page = browser.get(path).await;
    assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
    let changed = browser.post_form(path, &[("password", password)]).await;
    let done = "Your password has been changed successfully";
    assert!(
        changed.status == StatusCode::OK && changed.body.contains(done),
        "{path} changes the password, got {}: {}",
        changed.status,
        changed.body
    );
}

#[tokio::test]
async fn a_user_logs_in_spawns_a_notebook_and_it_answers_through_the_proxy() {
    let started = Instant::now();
    let app = HubApp::deploy().await;
    let namespace = app.namespace.name.as_str();
    let deployed = started.elapsed();
    let client = support::client().await;

    let hub = pods(&client, namespace, HUB_LABEL).await;
    assert_eq!(hub.len(), 1, "one hub pod");
    let statuses = hub[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone());
    for container in statuses.expect("the hub's container statuses") {
        assert!(container.ready, "the hub's probes pass: {container:?}");
        assert_eq!(container.restart_count, 0, "no restarts: {container:?}");
    }

    let image = format!("{IMAGE}:{TAG}");
    let mut browser = Browser::new(client.clone(), namespace);
    log_in(&mut browser, USER).await;
    refuse_options_the_hub_does_not_offer(&mut browser, USER).await;
    spawn_from_form(&mut browser, USER, &image).await;
    let spawned = started.elapsed();
    assert_notebook_pod(&pods(&client, namespace, NOTEBOOK_LABEL).await, &image);
    assert_user_volume_bound(&client, namespace).await;
    use_the_notebook(&mut browser, USER).await;
    stop_the_notebook(&mut browser, &client, namespace, USER).await;
    restart_the_hub_with_a_server_running(&mut browser, &client, namespace, USER).await;
    eprintln!(
        "hub Ready after {:.1} s, notebook ready after {:.1} s more, done at {:.1} s",
        deployed.as_secs_f64(),
        (spawned - deployed).as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
