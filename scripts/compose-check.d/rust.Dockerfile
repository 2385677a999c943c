# The stand-in for the official rust:1.95-bookworm image, which no registry here can serve.
# scripts/compose-check builds it from this machine's own Rust 1.95.0 toolchain (the same
# release), laid out as the official image lays it out: rustup in /usr/local/cargo/bin,
# the toolchain under /usr/local/rustup, the minimal profile (rustc, cargo, rust-std).
# The official image is buildpack-deps:bookworm underneath; this installs the part of its
# packages a Rust build uses. Two things differ, because nothing can be downloaded inside
# a build here: the wasm32-unknown-unknown standard library is already installed (so the
# Dockerfile's `rustup target add` finds it), and, when the machine has it, cargo-leptos is
# already installed the way `cargo install` records it (so the Dockerfile's `cargo install`
# finds it and does not spend twenty minutes compiling it). And the registries are reached
# here through a proxy that re-signs their certificates: the image trusts the certificate
# authorities this machine added to its own store (/usr/local/share/ca-certificates), as
# the machine does, or neither cargo nor npm could download a package in the build.
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl wget gnupg git \
      openssh-client procps autoconf automake bzip2 dpkg-dev file g++ gcc libc6-dev \
      libssl-dev libpq-dev make patch pkg-config unzip xz-utils zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    RUST_VERSION=1.95.0
COPY local-ca/ /usr/local/share/ca-certificates/
# npm's Node.js has its own list of authorities: it is told to read the system's too.
RUN update-ca-certificates
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
COPY rustup /usr/local/rustup
COPY cargo /usr/local/cargo
RUN chmod -R a+w /usr/local/rustup /usr/local/cargo \
 && rustup --version && cargo --version && rustc --version
