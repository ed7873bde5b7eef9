# The jervis binary in a small image: built static (pure Go, CGO off), run
# as a non-root user, data under /data. docker-compose.yml builds it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/jervis ./cmd/jervis

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/jervis /jervis
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/jervis"]
CMD ["serve", "--data", "/data", "--listen", "0.0.0.0:8080"]
