# sluice gateway image.
#
#   docker build -t sluice .
#   docker build --build-arg VERSION=v1.2.3 -t sluice:v1.2.3 .
#   docker run --rm -p 8080:8080 -p 9901:9901 \
#     -v "$PWD/sluice.yaml:/etc/sluice/sluice.yaml:ro" sluice
#
# The configuration baked in is examples/sluice.yaml, which listens on
# loopback: mount your own, with listen: 0.0.0.0:8080 and, to reach the
# admin API from outside the container, admin.listen: 0.0.0.0:9901 and an
# admin.token. deploy/dockerfile_test.go checks this file.

# Build stage: a static binary (no cgo), without local paths or symbols.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is what `sluice version` and sluice_build_info report; the build
# context has no .git, so without it they report "devel".
ARG VERSION=""
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/sluicehq/sluice/internal/buildinfo.version=${VERSION}" \
      -o /out/sluice ./cmd/sluice

# Final stage: the binary, CA certificates and a non-root user (uid 65532)
# from distroless, nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /sluice
COPY examples/sluice.yaml /etc/sluice/sluice.yaml
USER nonroot:nonroot
# Go's HTTP/2 server serves WebSocket over HTTP/2 (RFC 8441) only with
# this setting in the environment at start (README, "WebSocket over
# HTTP/2"); without it clients use WebSocket over HTTP/1.1.
ENV GODEBUG=http2xconnect=1
# The gateway (listen) and the admin API (admin.listen), at their defaults.
EXPOSE 8080 9901
ENTRYPOINT ["/sluice"]
CMD ["serve", "--config", "/etc/sluice/sluice.yaml"]
