# syntax=docker/dockerfile:1
#
# The qtop collector and gate as container images. Three targets:
#
#   docker build --target collector        -t qtop/collector:v1.2.3        --build-arg VERSION=v1.2.3 .
#   docker build --target collector-static -t qtop/collector:v1.2.3-static --build-arg VERSION=v1.2.3 .
#   docker build --target gate             -t qtop/gate:v1.2.3             --build-arg VERSION=v1.2.3 .
#
# collector         links DuckDB (cgo): the embedded default store, on a volume at /data.
# collector-static  CGO_ENABLED=0 -tags noduckdb: a static binary on an empty base, for
#                   ClickHouse-only deployments (--store clickhouse://HOST:9000/DB).
# gate              the reverse proxy in front of a service in any language (README, "Any
#                   language: the gate"), static on an empty base: typically a sidecar in
#                   the service's pod, listening on 8080, /metrics, /healthz and /readyz on
#                   9101; QTOP_UPSTREAM, QTOP_SERVICE, QTOP_COLLECTOR and QTOP_TOKEN_FILE
#                   from the environment (`gate --help`).
#
# Both run as an unprivileged user (65532) and take their settings from the
# environment (`collector serve --help`); tokens come from files
# (QTOP_TOKEN_FILE, QTOP_READ_TOKEN_FILE, QTOP_ADMIN_TOKEN_FILE), e.g. a
# mounted secret. They listen on 0.0.0.0, so the collector wants TLS
# (QTOP_TLS_CERT_FILE, QTOP_TLS_KEY_FILE, a mounted certificate) and the
# report and read tokens, and says which is missing — or QTOP_INSECURE=true
# behind something that encrypts. deploy/helm/qtop-collector runs the first
# one and gives it all three.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ENV LDFLAGS="-s -w -X github.com/qtop-dev/qtop/internal/buildinfo.version=${VERSION}"
RUN CGO_ENABLED=1 go build -trimpath -ldflags "$LDFLAGS" -o /out/collector ./cmd/collector \
 && CGO_ENABLED=1 go build -trimpath -ldflags "$LDFLAGS" -o /out/qtop ./cmd/qtop \
 && CGO_ENABLED=0 go build -trimpath -tags noduckdb -ldflags "$LDFLAGS" -o /out/static/collector ./cmd/collector \
 && CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o /out/static/gate ./cmd/gate \
 && /out/collector --version && /out/static/collector --version && /out/static/gate --version \
 && mkdir -p /out/data && chown 65532:65532 /out/data

FROM debian:bookworm-slim AS collector
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/collector /out/qtop /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV QTOP_LISTEN=0.0.0.0:7070 QTOP_DATA_DIR=/data QTOP_STORE=duckdb:///data/qtop.duckdb
VOLUME /data
EXPOSE 7070 4317
ENTRYPOINT ["/usr/local/bin/collector"]
CMD ["serve"]

FROM scratch AS collector-static
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/static/collector /collector
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV QTOP_LISTEN=0.0.0.0:7070 QTOP_DATA_DIR=/data
VOLUME /data
EXPOSE 7070 4317
ENTRYPOINT ["/collector"]
CMD ["serve"]

FROM scratch AS gate
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/static/gate /gate
USER 65532:65532
ENV QTOP_GATE_LISTEN=0.0.0.0:8080 QTOP_GATE_METRICS_LISTEN=0.0.0.0:9101
EXPOSE 8080 9101
ENTRYPOINT ["/gate"]
