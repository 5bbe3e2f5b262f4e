# The meshlife binary (CLI and `meshlife serve`) as a static executable on distroless.
#
#   docker build -t ghcr.io/meshlife/meshlife:0.1.0 .
#
# musl gives a static binary: no libc in the image, nothing to patch but meshlife itself. The
# build compiles the wasm module first (host-test/build.rs), so both targets are installed.
FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl wasm32-unknown-unknown
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p meshlife \
    && cp target/x86_64-unknown-linux-musl/release/meshlife /meshlife

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /meshlife /usr/local/bin/meshlife
# The uid and gid `meshlife install gatekeeper` runs the container as.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/meshlife"]
CMD ["serve"]
