# Builds the release server and site with cargo-leptos, then runs them on a slim image.
# scripts/compose-check builds it with podman and runs docker-compose.yml on it.
FROM rust:1.95-bookworm AS build
# cargo-leptos with no_downloads: it uses the wasm-bindgen and wasm-opt installed here
# instead of fetching its own at build time (as scripts/setup installs it).
RUN rustup target add wasm32-unknown-unknown \
 && apt-get update && apt-get install -y --no-install-recommends nodejs npm \
 && npm install -g binaryen@132 \
 && cargo install --locked cargo-leptos --version 0.3.10 --features no_downloads \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The wasm-bindgen CLI must match the library in Cargo.lock: a layer of its own, so that a
# change to the sources does not build it again (and a change to Cargo.lock only relinks
# it, from the cached target directory).
COPY Cargo.lock ./
RUN --mount=type=cache,id=once-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=once-wasm-bindgen-target,target=/tmp/wasm-bindgen-target \
    cargo install --target-dir /tmp/wasm-bindgen-target wasm-bindgen-cli \
      --version "=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)"
COPY . .
# The crates' downloads and the target directory are kept between builds (BuildKit's and
# buildah's cache mounts), so a rebuild compiles only what changed; the outputs are copied
# out of the cache within the same step.
RUN --mount=type=cache,id=once-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=once-target,target=/src/target \
    cargo leptos build --release --precompress --split \
 && cargo build --release -p provider \
 && mkdir -p /out \
 && cp -a target/release/server target/release/provider target/release/hash.txt target/site /out/

FROM debian:bookworm-slim
# The roots the shop verifies Stripe's (and any HTTPS provider's) certificate with.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /out/server /app/server
# The hashed names of the site's files, read beside the binary.
COPY --from=build /out/hash.txt /app/hash.txt
COPY --from=build /out/provider /app/provider
COPY --from=build /out/site /app/site
ENV LEPTOS_SITE_ROOT=/app/site LEPTOS_SITE_ADDR=0.0.0.0:3000
EXPOSE 3000
CMD ["/app/server"]
