# JupyterHub configuration of mlkube's notebook-hub component.
#
# This file is static; everything a param changes comes from settings.json beside it, which the
# component renders into the same ConfigMap. The hub runs with configurable-http-proxy as a
# sidecar in its pod: the proxy's API listens on 127.0.0.1 only, and its token is generated per
# pod by an init container into a memory-backed volume, so no secret is ever rendered.
import dbm
import hmac
import json
import math
import os
import re

from jupyterhub.auth import Authenticator
from jupyterhub.handlers import BaseHandler
from kubespawner import KubeSpawner
from tornado import web

CONFIG_DIR = "/etc/mlkube/hub"
STATE_DIR = "/srv/jupyterhub"
TOKEN_FILE = "/run/proxy/token"

with open(os.path.join(CONFIG_DIR, "settings.json")) as f:
    settings = json.load(f)

c = get_config()  # noqa: F821 -- traitlets provides get_config() to the files it loads

# --- the hub and its proxy ---------------------------------------------------------------------
c.JupyterHub.hub_ip = "0.0.0.0"
c.JupyterHub.hub_port = 8081
# Notebook pods reach the hub through the StatefulSet's headless Service.
c.JupyterHub.hub_connect_ip = settings["hubHost"]
c.JupyterHub.db_url = "sqlite:///" + os.path.join(STATE_DIR, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(STATE_DIR, "jupyterhub_cookie_secret")
# With its database on a volume, the hub finds running servers again after a restart, so they
# outlive it. In an emptyDir the database dies with the pod: the hub stops every server as it
# shuts down rather than leave pods behind that no route reaches and nothing ever stops.
c.JupyterHub.cleanup_servers = settings["stopServersAtShutdown"]
c.JupyterHub.authenticate_prometheus = False

c.ConfigurableHTTPProxy.should_start = False
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:8001"
with open(TOKEN_FILE) as f:
    c.ConfigurableHTTPProxy.auth_token = f.read().strip()


# --- authentication ----------------------------------------------------------------------------
class HeaderLoginHandler(BaseHandler):
    """Logs in the user named by a header that an authenticating proxy in front of the hub sets."""

    async def get(self):
        header = self.authenticator.header_name
        username = self.request.headers.get(header, "").strip()
        if not username:
            raise web.HTTPError(401, f"no {header} header: the hub must be reached through the authenticating proxy")
        user = await self.login_user({"name": username})
        if user is None:
            raise web.HTTPError(403, f"user {username} is not allowed")
        self.redirect(self.get_next_url(user))


class HeaderAuthenticator(Authenticator):
    """Trusts the user name in a request header (Kubeflow's IAP mode, for any such proxy)."""

    header_name = settings["authHeader"]

    def get_handlers(self, app):
        return [(r"/login", HeaderLoginHandler)]

    async def authenticate(self, handler, data):
        return data["name"]


def invitation(name):
    """The invitation the administrator gave `name` in the invitations Secret, mounted as a file
    of that name, or None. A Secret's keys are letters, digits, '-', '_' and '.', never '..'
    first: any other name has none, and a name never reaches outside the directory."""
    directory = settings["invitationsDir"]
    if not re.fullmatch(r"[-._a-zA-Z0-9]+", name) or name.startswith(".."):
        return None
    try:
        with open(os.path.join(directory, name), "rb") as f:
            return f.read().strip()
    except (FileNotFoundError, IsADirectoryError):
        return None


def guarded_first_use():
    """FirstUseAuthenticator that, before it stores a new name's password, refuses a name the
    hub does not allow (on its own it stores the password first, and the hub checks the list
    after, so a stranger refused under a listed-to-be name would have set that name's password)
    and, with invitations, a first password that is not the name's invitation."""
    from firstuseauthenticator import FirstUseAuthenticator

    class GuardedFirstUseAuthenticator(FirstUseAuthenticator):
        async def authenticate(self, handler, data):
            name = self.normalize_username(data["username"])
            if not self.check_allowed(name):
                return None
            if settings["invitationsDir"] and not self.has_password(name):
                given = invitation(name)
                if given is None or not hmac.compare_digest(given, data["password"].encode("utf8")):
                    self.log.warning("%s has no password yet and was not given its invitation", name)
                    return None
            return await super().authenticate(handler, data)

        def has_password(self, name):
            with dbm.open(self.dbm_path, "c", 0o600) as db:
                return name.encode("utf8") in db

    return GuardedFirstUseAuthenticator


if settings["authenticator"] == "header":
    c.JupyterHub.authenticator_class = HeaderAuthenticator
elif settings["authenticator"] == "firstuse":
    # A name's first login sets its password, kept as a bcrypt hash beside the hub's database on
    # its volume: nobody else logs in under a name that has one, also after the hub restarts.
    c.JupyterHub.authenticator_class = guarded_first_use()
    c.FirstUseAuthenticator.dbm_path = os.path.join(STATE_DIR, "passwords")
else:
    # Any user name and password: for a cluster of one's own only.
    c.JupyterHub.authenticator_class = "dummy"

if settings["allowedUsers"] is None:
    c.Authenticator.allow_all = True
else:
    # Only these names log in. The list is the whole truth: a name taken out of it is refused,
    # though the hub's database still holds it (which JupyterHub would otherwise keep allowing).
    c.Authenticator.allow_all = False
    c.Authenticator.allowed_users = set(settings["allowedUsers"])
    c.Authenticator.allow_existing_users = False


# --- spawning notebooks ------------------------------------------------------------------------
def _gpu_options(selected):
    return "".join(
        f'<option value="{n}"{" selected" if n == selected else ""}>{n}</option>'
        for n in range(settings["notebookMaxGpus"] + 1)
    )


def options_form(spawner):
    images = "".join(f'<option value="{image}">{image}</option>' for image in settings["notebookImages"])
    cpu_max = settings["notebookCpuLimit"] or ""
    memory_max = settings["notebookMemoryLimitGb"] or ""
    form = f"""
<div class="form-group">
  <label for="image">Image</label>
  <select class="form-control" name="image" id="image">{images}</select>
</div>
<div class="form-group">
  <label for="cpu">CPU (cores)</label>
  <input class="form-control" type="number" name="cpu" id="cpu" min="0.1" max="{cpu_max}" step="0.1"
         value="{settings['notebookCpu']}">
</div>
<div class="form-group">
  <label for="memory">Memory (GB)</label>
  <input class="form-control" type="number" name="memory" id="memory" min="0.5" max="{memory_max}" step="0.5"
         value="{settings['notebookMemoryGb']}">
</div>
"""
    if settings["notebookMaxGpus"] > 0:
        form += f"""
<div class="form-group">
  <label for="gpus">GPUs (nvidia.com/gpu)</label>
  <select class="form-control" name="gpus" id="gpus">{_gpu_options(0)}</select>
</div>
"""
    return form


OPTIONS = ("image", "cpu", "memory", "gpus")


def options_from_form(formdata):
    """The form's fields as they came; apply_user_options checks them, as it checks the API's."""
    fields = {field: formdata.get(field, [""])[0].strip() for field in OPTIONS}
    return {field: value for field, value in fields.items() if value}


def _number(options, field, default, maximum, whole=False):
    raw = options.get(field, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise web.HTTPError(400, f"{field} must be a number, got {raw!r}")
    if not math.isfinite(value) or (whole and not value.is_integer()):
        raise web.HTTPError(400, f"{field} must be a {'whole' if whole else 'finite'} number, got {raw!r}")
    if value < 0 or (value == 0 and not whole):
        raise web.HTTPError(400, f"{field} must be more than 0, got {raw!r}")
    if maximum is not None and value > maximum:
        raise web.HTTPError(400, f"{field} must be at most {maximum}, got {raw!r}")
    return int(value) if whole else value


def apply_user_options(spawner, user_options):
    """Checks a user's options, from the form or the REST API alike, and sets every attribute they
    decide: the spawner is reused by the user's next start, which must not inherit this one's GPUs."""
    unknown = sorted(set(user_options) - set(OPTIONS))
    if unknown:
        raise web.HTTPError(400, f"unknown options {unknown}; the options are {list(OPTIONS)}")
    image = user_options.get("image", settings["notebookImages"][0])
    if image not in settings["notebookImages"]:
        raise web.HTTPError(400, f"image {image!r} is not offered; the images are {settings['notebookImages']}")
    spawner.image = image
    cpu = _number(user_options, "cpu", settings["notebookCpu"], settings["notebookCpuLimit"])
    spawner.cpu_guarantee = cpu
    memory = _number(user_options, "memory", settings["notebookMemoryGb"], settings["notebookMemoryLimitGb"])
    spawner.mem_guarantee = f"{memory}G"
    gpus = _number(user_options, "gpus", 0, settings["notebookMaxGpus"], whole=True)
    spawner.extra_resource_limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    if settings["userNamespaceTemplate"]:
        # The user's profile; KubeSpawner watches it once the namespace is set (before start).
        spawner.namespace = spawner._expand_user_properties(settings["userNamespaceTemplate"])


c.KubeSpawner.options_form = options_form
c.KubeSpawner.options_from_form = options_from_form
# Called for every start, also through the REST API, which never sees the form (JupyterHub 5.3).
c.KubeSpawner.apply_user_options = apply_user_options
c.JupyterHub.spawner_class = KubeSpawner

c.KubeSpawner.namespace = settings["namespace"]
c.KubeSpawner.service_account = settings["notebookServiceAccount"]
c.KubeSpawner.image = settings["notebookImages"][0]
c.KubeSpawner.cpu_guarantee = float(settings["notebookCpu"])
c.KubeSpawner.mem_guarantee = f'{settings["notebookMemoryGb"]}G'
if settings["notebookCpuLimit"] is not None:
    c.KubeSpawner.cpu_limit = float(settings["notebookCpuLimit"])
if settings["notebookMemoryLimitGb"] is not None:
    c.KubeSpawner.mem_limit = f'{settings["notebookMemoryLimitGb"]}G'
c.KubeSpawner.uid = settings["notebookUid"]
c.KubeSpawner.fs_gid = settings["notebookGid"]
c.KubeSpawner.default_url = settings["defaultUrl"]
c.KubeSpawner.common_labels = settings["notebookLabels"]
# Large notebook images take a while to pull on a fresh node.
c.KubeSpawner.start_timeout = 1800
c.KubeSpawner.http_timeout = 300

volumes = []
volume_mounts = []
if settings["notebookPvcMount"]:
    claim = "claim-{username}{servername}"
    c.KubeSpawner.storage_pvc_ensure = True
    c.KubeSpawner.pvc_name_template = claim
    c.KubeSpawner.storage_capacity = settings["notebookStorage"]
    c.KubeSpawner.storage_access_modes = ["ReadWriteOnce"]
    if settings["notebookStorageClass"]:
        c.KubeSpawner.storage_class = settings["notebookStorageClass"]
    volumes.append({"name": "home", "persistentVolumeClaim": {"claimName": claim}})
    volume_mounts.append({"name": "home", "mountPath": settings["notebookPvcMount"]})
for index, disk in enumerate(settings["disks"]):
    volumes.append({"name": f"disk-{index}", "persistentVolumeClaim": {"claimName": disk}})
    volume_mounts.append({"name": f"disk-{index}", "mountPath": f"/mnt/{disk}"})
c.KubeSpawner.volumes = volumes
c.KubeSpawner.volume_mounts = volume_mounts
