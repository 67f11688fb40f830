# Multi-stage build: a static binary on a minimal, non-root final image.
# (No Docker engine runs on the project's development and CI machines; this file is
# kept conventional for users: `make docker`, or docker-compose with a ZooKeeper.)
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/coord-sidecar ./cmd/coord-sidecar

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coord-sidecar /coord-sidecar
USER nonroot:nonroot
ENV COORD_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/coord-sidecar"]
