# The operator image for machines with a container daemon; `image/build.sh` builds the same
# image without one (and is what CI builds and tests): a static musl binary, run as a non-root
# user, with `mlkube operator` as its entrypoint. The training-operator component's Deployment
# runs it as `mlkube operator --metrics-addr :8080 --health-addr :8081`.
#
#   docker build -t mlkube:dev .
#
# Build stage: Alpine's Rust targets musl, whose binaries are statically linked by default.
FROM rust:1.89-alpine AS build
# ring and mimalloc compile C code.
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin mlkube \
 && strip target/release/mlkube \
 && ./target/release/mlkube --version

# Run stage: nothing but the binary. In a cluster the client trusts the service account's CA
# bundle, so no system certificates are needed.
FROM scratch
COPY --from=build /src/target/release/mlkube /usr/local/bin/mlkube
ENV PATH=/usr/local/bin:/usr/bin:/bin
# 65532: the conventional "nonroot" user; no shell, no passwd file, nothing to escalate with.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/mlkube", "operator"]
