# Builds the release server and site with cargo-leptos, then runs them on a slim image.
FROM rust:1.95-bookworm AS build
RUN rustup target add wasm32-unknown-unknown \
 && apt-get update && apt-get install -y --no-install-recommends nodejs npm \
 && npm install -g binaryen@132 \
 && cargo install --locked cargo-leptos --version 0.3.10
WORKDIR /src
COPY . .
RUN cargo install wasm-bindgen-cli --version "=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)" \
 && cargo leptos build --release --precompress --split \
 && cargo build --release -p provider

FROM debian:bookworm-slim
# The roots the shop verifies Stripe's (and any HTTPS provider's) certificate with.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /src/target/release/server /app/server
# The hashed names of the site's files, read beside the binary.
COPY --from=build /src/target/release/hash.txt /app/hash.txt
COPY --from=build /src/target/release/provider /app/provider
COPY --from=build /src/target/site /app/site
ENV LEPTOS_SITE_ROOT=/app/site LEPTOS_SITE_ADDR=0.0.0.0:3000
EXPOSE 3000
CMD ["/app/server"]
