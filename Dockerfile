# raftmq image: one static binary, run as uid:gid 65532:65532 (distroless's
# "nonroot"), data under the /var/lib/raftmq volume. Used by deploy/compose.yaml
# and the Kubernetes manifests in deploy/k8s/.
#
#   docker build -t raftmq:latest .
#   docker run --rm raftmq:latest version
#
# `raftmq version` shows the commit when the build context holds the
# repository's .git directory (the go command stamps nothing when .git is a
# file, as in a linked git worktree, or absent).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces hashicorp/raft with this directory.
COPY third_party ./third_party
RUN go mod download
COPY . .
# Static (no cgo), reproducible paths (-trimpath); the data directory is
# created here because the runtime image has no shell.
RUN CGO_ENABLED=0 go build -trimpath -o /out/raftmq ./cmd/raftmq \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/raftmq /usr/local/bin/raftmq
# A named volume is initialised from this directory, so it starts out owned
# by the runtime user; on Kubernetes, fsGroup does the same for a PVC.
COPY --from=build --chown=65532:65532 /out/data /var/lib/raftmq
USER 65532:65532
WORKDIR /var/lib/raftmq
VOLUME ["/var/lib/raftmq"]
# Name server: 9876 remoting, 9878 gossip (TCP+UDP), 9879 HTTP (metrics,
# health). Broker node with listenPort 10911: 10909 VIP channel, 10911
# remoting, 10913 gossip (TCP+UDP), 10914 HTTP, 40911 Raft (from dLegerPeers).
EXPOSE 9876/tcp 9878/tcp 9878/udp 9879/tcp 10909/tcp 10911/tcp 10913/tcp 10913/udp 10914/tcp 40911/tcp
ENTRYPOINT ["/usr/local/bin/raftmq"]
CMD ["--help"]
