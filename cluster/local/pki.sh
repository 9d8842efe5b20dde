# shellcheck shell=bash
# The cluster's certificate authority, the API server's and the admin's certificates, and its
# kubeconfigs. Sourced by cluster/local-cluster.sh.

generate_pki() {
  local pki=$STATE_DIR/pki
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=mlkube-local-ca" \
      -keyout ca.key -out ca.crt
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr
    printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      "extendedKeyUsage=serverAuth" >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=mlkube-admin" -keyout admin.key -out admin.csr
    printf '%s\n' "extendedKeyUsage=clientAuth" >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out admin.crt
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
  ) >"$STATE_DIR/pki.log" 2>&1 || die "generating certificates with openssl failed; see $STATE_DIR/pki.log"
  write_kubeconfig "$KUBECONFIG_FILE" mlkube-admin "" \
    "    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")"
}

# A kubeconfig for this cluster, readable by its owner only: FILE USER NAMESPACE CREDENTIALS
# [HOST], where CREDENTIALS are the lines of the user's entry (a client certificate, or a token)
# and HOST the API server's address (127.0.0.1, its forwarder's, unless told).
write_kubeconfig() {
  local file=$1 user=$2 namespace=$3 credentials=$4 host=${5:-127.0.0.1} namespace_line=""
  [ -z "$namespace" ] || namespace_line=$'\n'"    namespace: $namespace"
  (
    umask 077
    cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: mlkube-local
  cluster:
    server: https://$host:$API_PORT
    certificate-authority-data: $(base64 -w0 "$STATE_DIR/pki/ca.crt")
users:
- name: $user
  user:
$credentials
contexts:
- name: mlkube-local
  context:
    cluster: mlkube-local
    user: $user$namespace_line
current-context: mlkube-local
KUBECONFIG
  )
}
