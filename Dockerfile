# syntax=docker/dockerfile:1
#
# The kafkamender worker image (docs/deployment.md): the worker, the emitter and a small
# HTTP health probe, static binaries on a distroless base, run as a non-root user.
#
#   docker build -t kafkamender:dev .
#   docker run --rm -p 8080:8080 -v "$PWD/worker.yaml:/etc/kafkamender/worker.yaml:ro" kafkamender:dev
#
# The image ships no configuration: mount one at /etc/kafkamender/worker.yaml (its
# http.listen must bind 0.0.0.0, not 127.0.0.1, to be reachable from outside the
# container), or pass --config elsewhere. Other commands:
#   docker run --rm kafkamender:dev logdir inspect ...                 (the offline log-dir tool)
#   docker run --rm --entrypoint emitter kafkamender:dev --help
#   docker run --rm --entrypoint healthcheck kafkamender:dev --help
#
# deployments/check tests this file (parse, stages, user, ports, build context).

# The Go of go.mod's toolchain line, the patch release with the standard library's fixes.
FROM golang:1.26.8 AS build
# The image's Go must build the module as it is: never download another toolchain.
ENV GOTOOLCHAIN=local
# The version --version prints and kafkamender_build_info carries:
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t kafkamender:dev .
ARG VERSION
WORKDIR /src
# Modules first, in a layer of their own and a cache that outlives it, so that a change
# of source does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY deployments/docker/ deployments/docker/
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
        -ldflags="-s -w -X github.com/kafkamender/kafkamender/internal/version.Version=${VERSION}" -o /out/ \
        ./cmd/worker ./cmd/emitter ./deployments/docker/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="kafkamender" \
      org.opencontainers.image.description="Repairs Kafka partition placement on demand, from CloudEvents on NATS JetStream"
COPY --from=build /out/worker /out/emitter /out/healthcheck /usr/local/bin/
# distroless's nonroot user, by number so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
# The HTTP listener (http.listen): /healthz, /readyz, /metrics, POST /v1/alertmanager.
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/worker"]
CMD ["--config", "/etc/kafkamender/worker.yaml"]
