# The mlkube binary as a small static image that runs as a non-root user; the tf-job-operator
# component's Deployment runs it as `mlkube operator --metrics-addr :8080 --health-addr :8081`.
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
# 65532: the conventional "nonroot" user; no shell, no passwd file, nothing to escalate with.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/mlkube"]
CMD ["operator", "--metrics-addr", ":8080", "--health-addr", ":8081"]
