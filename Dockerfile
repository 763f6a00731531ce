# chronoq: a static binary on a distroless base.
#   docker build -t chronoq .
#   docker run -e REDIS_URL=redis://redis:6379/0 -e CHRONOQ_TOKEN=... -p 127.0.0.1:8080:8080 chronoq
# Inside the container it listens on 0.0.0.0:8080, so it needs a token
# (CHRONOQ_TOKEN): serve refuses a non-loopback address without one.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/chronoq ./cmd/chronoq

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/chronoq /usr/local/bin/chronoq
USER nonroot:nonroot
ENV CHRONOQ_LISTEN=0.0.0.0:8080 \
    CHRONOQ_LOG_FORMAT=json
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/chronoq"]
CMD ["serve"]
